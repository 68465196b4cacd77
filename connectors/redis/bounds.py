"""Bounded answers: a Redis value larger than ``max_value_bytes`` fails its own key.

redis-py has read the reply by the time we see it, so the bound does not save that read
(Redis itself caps one value at ``proto-max-bulk-len``, 512 MB by default). What it
saves is everything after: the decode, the rows carrying the value, and the copies the
join and Spark would make of it. The other keys of the command are decoded as usual.
"""

from __future__ import annotations

from typing import Any

from enrich.spi import LookupFailed

from .codec import Command
from .config import ValueFormat

Failures = dict[Any, LookupFailed]


def split_oversized(
    command: Command, reply: Any, fmt: ValueFormat, limit: int, where: str
) -> tuple[Command, Any, Failures]:
    """``command`` and ``reply`` without the keys whose answer exceeds ``limit`` bytes.

    Returns the narrowed command and reply (the same objects when nothing is too large,
    the common case, checked in C) and a ``LookupFailed`` for each key left out.
    """
    if fmt is ValueFormat.HASH:
        size = _hash_size(reply)
        if size <= limit:
            return command, reply, {}
        key = command.keys[0]
        failure = _too_large(key, command.redis_keys[0], size, limit, where)
        return Command(command.args, (), ()), None, {key: failure}
    if max(map(len, filter(None, reply)), default=0) <= limit:
        return command, reply, {}
    keys, redis_keys, kept = [], [], []
    failures: Failures = {}
    for key, redis_key, value in zip(command.keys, command.redis_keys, reply, strict=True):
        if value is not None and len(value) > limit:
            failures[key] = _too_large(key, redis_key, len(value), limit, where)
        else:
            keys.append(key)
            redis_keys.append(redis_key)
            kept.append(value)
    return Command(command.args, tuple(keys), tuple(redis_keys)), kept, failures


def _hash_size(reply: Any) -> int:
    if isinstance(reply, dict):  # HGETALL: field names count too
        return sum(map(len, reply)) + sum(map(len, filter(None, reply.values())))
    return sum(map(len, filter(None, reply)))  # HMGET: values in field order


def _too_large(key: Any, redis_key: bytes, size: int, limit: int, where: str) -> LookupFailed:
    shown = redis_key if len(redis_key) <= 60 else redis_key[:57] + b"..."
    return LookupFailed(
        f"{where}: value of redis key {shown!r} is {size} bytes, more than max_value_bytes={limit}",
        key=key,
        kind="too_large",
        retryable=False,
    )
