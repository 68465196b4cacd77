"""Reading a whole Redis dimension, for a full cache: ``SCAN`` pages, pipelined reads.

The keys are found with ``SCAN MATCH <pattern> COUNT <page_rows>``, the key template's
literal text with its glob characters escaped and ``*`` in each slot (``"user:{}"``
scans ``user:*``; ``"a[1]:{}"`` scans ``a\\[1\\]:*``); a cluster is scanned node by node
(redis-py's ``scan_iter``). Each page of keys is read as a lookup of those keys is (MGETs
of ``max_batch`` keys, or one HGETALL/HMGET per key, pipelined) and decoded as a lookup
decodes them, so a snapshot holds exactly what lookups of its keys would have answered:
JSON values in bulk by Arrow's reader (:func:`connectors.redis.arrow.decode_json`, whose
per-value fallback is the lookup's codec), hashes and strings by the codec, key by key.
Each page is handed over as an Arrow table of the keys with a single row (the snapshot
takes its columns as they are), plus a mapping of the rare other answers: a key's
several rows, or its own error (a value that does not decode fails only its key).

``SCAN`` never blocks the server for long (each call looks at about ``COUNT`` slots of
its table), and the next page is asked only after the current one is read, so a load
holds at most one page of raw replies in memory beyond the snapshot itself. ``SCAN``
may return a key twice (it is read once: the scan remembers the keys it has seen), and
a key written during the scan may be missed; a key deleted between the scan and the
read is left out.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pyarrow as pa

from enrich.spi import ColumnarAnswer, answer_from_mapping, arrow_schema

from . import arrow, client, codec
from .config import KeyTemplate, ValueFormat

_GLOB = re.compile(rb"([*?\[\]\\])")


def match_pattern(template: KeyTemplate) -> bytes:
    """The ``SCAN MATCH`` pattern of every key ``template`` renders: its literal parts
    with ``* ? [ ] \\`` escaped, ``*`` in each slot."""
    return b"*".join(_GLOB.sub(rb"\\\1", literal) for literal in template.literals)


async def scan_dimension(lookup: Any, page_rows: int) -> AsyncIterator[tuple[Any, int]]:
    """Read the dimension of ``lookup``: yield ``(page, bytes read)`` per page of keys,
    each key once. A page is an Arrow table (the Redis keys, then the schema's fields:
    one row per key that has a single row) and, when some keys of the page answered
    otherwise, a mapping ``{redis key: answer}`` of those (several rows, or the key's
    own error), with 0 bytes. A miss is in neither. ``lookup`` is a ``RedisLookup``
    (its settings, reply reading and decoding are used; not imported here, which would
    make an import circle).

    Raises:
        LookupFailed: the store failed (connection, timeout, authentication).
    """
    settings = lookup._settings
    endpoint = settings.connection.endpoint
    handle = client.client_for(settings.connection)
    pattern = match_pattern(settings.key_template)
    struct_type = pa.struct(list(arrow_schema(lookup.schema)))
    page: list[bytes] = []
    seen: set[bytes] = set()  # SCAN may return a key twice; an Arrow page holds it once
    try:
        # scan_iter takes a pooled connection per SCAN call, none between calls.
        async for redis_key in handle.client.scan_iter(match=pattern, count=page_rows):
            if redis_key in seen:
                continue
            seen.add(redis_key)
            page.append(redis_key)
            if len(page) >= page_rows:
                for item in await _read(lookup, handle, page, struct_type):
                    yield item
                page = []
    except client._DRIVER_ERRORS as exc:
        raise client.translate(exc, endpoint) from exc
    if page:
        for item in await _read(lookup, handle, page, struct_type):
            yield item


async def _read(
    lookup: Any,
    handle: client.ClientHandle,
    redis_keys: Sequence[bytes],
    struct_type: pa.StructType,
) -> list[tuple[Any, int]]:
    """The pages of ``redis_keys`` (distinct): see :func:`scan_dimension`."""
    if lookup._settings.value is ValueFormat.JSON:
        pages = await _read_json(lookup, redis_keys, struct_type)
        if pages is not None:
            return pages
    # Hashes and strings, or JSON whose MGET the server denied (ACL): key by key.
    settings = lookup._settings
    endpoint = settings.connection.endpoint
    wanted = [(key, key) for key in redis_keys]
    commands = codec.plan(settings, wanted, cluster=endpoint.cluster)
    batches = codec.pack(commands, settings.max_batch)
    replies = await client.execute(handle, batches, endpoint)
    hashes = settings.value is ValueFormat.HASH
    results: dict[bytes, Any] = {}
    denied: list[codec.Command] = []
    size = 0
    for batch, batch_replies in zip(batches, replies, strict=True):
        for command, reply in zip(batch, batch_replies, strict=True):
            size += _size(command, reply, hashes)
        lookup._read(batch, batch_replies, results, denied)
    if denied:
        await lookup._ask_singly(handle, denied, results)
    return _pages(redis_keys, answer_from_mapping(redis_keys, results, struct_type), size)


async def _read_json(
    lookup: Any, redis_keys: Sequence[bytes], struct_type: pa.StructType
) -> list[tuple[Any, int]] | None:
    """The pages of JSON values read by the columnar lookup's MGETs and decoded in bulk
    (:func:`arrow.decode_json`: the same outcome per key as ``lookup_many``), or None
    when the server denied an MGET."""
    settings = lookup._settings
    keys = pa.array(redis_keys, pa.binary())
    replies = await arrow.mget_by_command(settings, keys, keys)
    if replies is None:
        return None
    values, errors = replies
    size = sum(map(len, redis_keys)) + sum(map(len, filter(None, values)))
    arrow.fail_oversized(values, errors, keys, lambda: keys, settings)
    answer = arrow.decode_json(values, redis_keys, settings, lookup.schema, struct_type)
    answer.errors.update(errors)
    return _pages(redis_keys, answer, size)


def _pages(redis_keys: Sequence[bytes], answer: ColumnarAnswer, size: int) -> list[tuple[Any, int]]:
    """An Arrow page of the keys with a single row, and a mapping page of the others
    (several rows, or an error) if any; a miss is in neither."""
    rows = answer.rows
    single = rows.is_valid()  # a key with an error or several rows has a null row
    kept = rows.filter(single)
    keys = pa.array(redis_keys, pa.binary()).filter(single)
    names = ["redis_key", *(field.name for field in rows.type)]
    pages: list[tuple[Any, int]] = [(pa.Table.from_arrays([keys, *kept.flatten()], names), size)]
    if answer.errors or answer.multi:
        others: dict[bytes, Any] = {redis_keys[p]: e for p, e in answer.errors.items()}
        others.update((redis_keys[p], several) for p, several in answer.multi.items())
        pages.append((others, 0))
    return pages


def _size(command: codec.Command, reply: Any, hashes: bool) -> int:
    """Bytes of a reply as stored, with its keys' names."""
    size = sum(map(len, command.redis_keys))
    if isinstance(reply, BaseException) or reply is None:
        return size
    if hashes and isinstance(reply, dict):
        return size + sum(map(len, reply)) + sum(map(len, filter(None, reply.values())))
    return size + sum(map(len, filter(None, reply)))
