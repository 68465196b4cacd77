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

from . import bounds, client, codec
from .arrow import decode_json
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
    settings = lookup._settings
    endpoint = settings.connection.endpoint
    wanted = [(key, key) for key in redis_keys]
    commands = codec.plan(settings, wanted, cluster=endpoint.cluster)
    batches = codec.pack(commands, settings.max_batch)
    replies = await client.execute(handle, batches, endpoint)
    hashes = settings.value is ValueFormat.HASH
    size = 0
    for batch, batch_replies in zip(batches, replies, strict=True):
        for command, reply in zip(batch, batch_replies, strict=True):
            size += _size(command, reply, hashes)
    answer = None
    if settings.value is ValueFormat.JSON:
        answer = _json_answer(lookup, redis_keys, batches, replies, struct_type)
    if answer is None:  # hashes and strings, or an MGET denied: the per-key decoder
        results: dict[bytes, Any] = {}
        denied: list[codec.Command] = []
        for batch, batch_replies in zip(batches, replies, strict=True):
            lookup._read(batch, batch_replies, results, denied)
        if denied:
            await lookup._ask_singly(handle, denied, results)
        answer = answer_from_mapping(redis_keys, results, struct_type)
    return _pages(redis_keys, answer, size)


def _json_answer(
    lookup: Any,
    redis_keys: Sequence[bytes],
    batches: Sequence[Sequence[codec.Command]],
    replies: Sequence[Sequence[Any]],
    struct_type: pa.StructType,
) -> ColumnarAnswer | None:
    """The MGETs' JSON values decoded in bulk (:func:`arrow.decode_json`: the same
    outcome per key as ``lookup_many``), or None when the server denied an MGET (ACL:
    the per-key path asks its keys one by one)."""
    settings = lookup._settings
    endpoint = settings.connection.endpoint
    where = f"redis at {endpoint.address}"
    got: dict[bytes, bytes | None] = {}
    failed: dict[bytes, BaseException] = {}
    for batch, batch_replies in zip(batches, replies, strict=True):
        for command, reply in zip(batch, batch_replies, strict=True):
            if isinstance(reply, Exception):
                if len(command.keys) > 1 and client.is_denied(reply):
                    return None
                for key in command.keys:
                    failed[key] = client.translate(reply, endpoint, key=key)
                continue
            command, reply, too_large = bounds.split_oversized(
                command, reply, settings.value, settings.max_value_bytes, where
            )
            failed.update(too_large)
            got.update(zip(command.keys, reply, strict=True))
    values = list(map(got.get, redis_keys))
    answer = decode_json(values, redis_keys, settings, lookup.schema, struct_type)
    if failed:
        answer.errors.update(
            (position, failed[key]) for position, key in enumerate(redis_keys) if key in failed
        )
    return answer


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
