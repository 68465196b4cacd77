"""Reading a whole Redis dimension, for a full cache: ``SCAN`` pages, pipelined reads.

The keys are found with ``SCAN MATCH <pattern> COUNT <page_rows>``, the key template's
literal text with its glob characters escaped and ``*`` in each slot (``"user:{}"``
scans ``user:*``; ``"a[1]:{}"`` scans ``a\\[1\\]:*``); a cluster is scanned node by node
(redis-py's ``scan_iter``). Each page of keys is read as a lookup of those keys is (MGETs
of ``max_batch`` keys, or one HGETALL/HMGET per key, pipelined) and decoded by the same
codec, so a snapshot holds exactly what lookups of its keys would have answered.

``SCAN`` never blocks the server for long (each call looks at about ``COUNT`` slots of
its table), and the next page is asked only after the current one is read, so a load
holds at most one page of raw replies in memory beyond the snapshot itself. ``SCAN``
may return a key twice, and a key written during the scan may be missed; a key deleted
between the scan and the read is left out.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from . import client, codec
from .config import KeyTemplate, ValueFormat

_GLOB = re.compile(rb"([*?\[\]\\])")


def match_pattern(template: KeyTemplate) -> bytes:
    """The ``SCAN MATCH`` pattern of every key ``template`` renders: its literal parts
    with ``* ? [ ] \\`` escaped, ``*`` in each slot."""
    return b"*".join(_GLOB.sub(rb"\\\1", literal) for literal in template.literals)


async def scan_dimension(
    lookup: Any, page_rows: int
) -> AsyncIterator[tuple[dict[bytes, Any], int]]:
    """Read the dimension of ``lookup``: yield ``({redis key: answer}, bytes read)`` per
    page of keys, answers as ``lookup_many`` gives them (a row tuple, a list of rows,
    None, or an exception). ``lookup`` is a ``RedisLookup`` (its settings, reply reading
    and decoding are used; not imported here, which would make an import circle).

    Raises:
        LookupFailed: the store failed (connection, timeout, authentication).
    """
    settings = lookup._settings
    endpoint = settings.connection.endpoint
    handle = client.client_for(settings.connection)
    pattern = match_pattern(settings.key_template)
    page: list[bytes] = []
    try:
        # scan_iter takes a pooled connection per SCAN call, none between calls.
        async for redis_key in handle.client.scan_iter(match=pattern, count=page_rows):
            page.append(redis_key)
            if len(page) >= page_rows:
                yield await _read(lookup, handle, page)
                page = []
    except client._DRIVER_ERRORS as exc:
        raise client.translate(exc, endpoint) from exc
    if page:
        yield await _read(lookup, handle, page)


async def _read(
    lookup: Any, handle: client.ClientHandle, redis_keys: Sequence[bytes]
) -> tuple[dict[bytes, Any], int]:
    settings = lookup._settings
    endpoint = settings.connection.endpoint
    wanted = [(key, key) for key in dict.fromkeys(redis_keys)]
    commands = codec.plan(settings, wanted, cluster=endpoint.cluster)
    batches = codec.pack(commands, settings.max_batch)
    replies = await client.execute(handle, batches, endpoint)
    results: dict[bytes, Any] = {}
    denied: list[codec.Command] = []
    size = 0
    hashes = settings.value is ValueFormat.HASH
    for batch, batch_replies in zip(batches, replies, strict=True):
        for command, reply in zip(batch, batch_replies, strict=True):
            size += _size(command, reply, hashes)
        lookup._read(batch, batch_replies, results, denied)
    if denied:
        await lookup._ask_singly(handle, denied, results)
    return results, size


def _size(command: codec.Command, reply: Any, hashes: bool) -> int:
    """Bytes of a reply as stored, with its keys' names."""
    size = sum(map(len, command.redis_keys))
    if isinstance(reply, BaseException) or reply is None:
        return size
    if hashes and isinstance(reply, dict):
        return size + sum(map(len, reply)) + sum(map(len, filter(None, reply.values())))
    return size + sum(map(len, filter(None, reply)))
