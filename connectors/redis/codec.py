"""The synchronous half of a Redis lookup: which commands to send, and what replies mean.

Nothing here does I/O, so planning and decoding are tested without a server:
:func:`plan` turns rendered keys into commands (MGET chunks, per-key HMGET/HGETALL),
:func:`pack` groups commands into pipelines of at most ``max_batch`` keys, and
:func:`decode` turns one command's reply into per-key results. A value that does not
decode becomes that key's :class:`~enrich.DecodeError`; it never fails the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from redis.crc import key_slot

from enrich.spi import DecodeError, Schema, short

from .config import LookupSettings, ValueFormat

Row = tuple[Any, ...]
Result = Row | list[Row] | None | Exception


@dataclass(frozen=True)
class Command:
    """One Redis command and the lookup keys whose answers its reply holds, in order."""

    args: tuple[Any, ...]
    keys: tuple[Any, ...]
    redis_keys: tuple[bytes, ...]


def plan(
    settings: LookupSettings, wanted: Sequence[tuple[Any, bytes]], *, cluster: bool
) -> list[Command]:
    """Commands answering ``wanted`` (lookup key, Redis key) pairs.

    Strings are read with MGET, at most ``max_batch`` keys each; on a cluster each MGET
    holds keys of one hash slot only (cross-slot MGET is refused by the server). Hashes
    are read with one HGETALL, or HMGET of the configured fields, per key.
    """
    if settings.value is ValueFormat.HASH:
        fields = settings.hash_fields
        head: tuple[Any, ...] = ("HGETALL",) if fields is None else ("HMGET",)
        tail = () if fields is None else tuple(stored for _, stored in fields)
        return [Command((*head, rk, *tail), (key,), (rk,)) for key, rk in wanted]
    groups: list[Sequence[tuple[Any, bytes]]]
    if cluster:
        by_slot: dict[int, list[tuple[Any, bytes]]] = {}
        for pair in wanted:
            by_slot.setdefault(key_slot(pair[1]), []).append(pair)
        groups = list(by_slot.values())
    else:
        groups = [wanted]
    commands = []
    for group in groups:
        for chunk in _chunks(group, settings.max_batch):
            redis_keys = tuple(rk for _, rk in chunk)
            commands.append(Command(("MGET", *redis_keys), tuple(k for k, _ in chunk), redis_keys))
    return commands


def single(command: Command, index: int) -> Command:
    """The MGET ``command`` narrowed to its key number ``index`` alone."""
    redis_key = command.redis_keys[index]
    return Command(("MGET", redis_key), (command.keys[index],), (redis_key,))


def pack(commands: Sequence[Command], max_batch: int) -> list[list[Command]]:
    """Consecutive commands grouped so that each group holds at most ``max_batch`` keys.

    Each group is sent as one pipeline (one round trip per node).
    """
    batches: list[list[Command]] = []
    current: list[Command] = []
    size = 0
    for command in commands:
        weight = len(command.keys)
        if current and size + weight > max_batch:
            batches.append(current)
            current, size = [], 0
        current.append(command)
        size += weight
    if current:
        batches.append(current)
    return batches


def decode(
    command: Command, reply: Any, settings: LookupSettings, schema: Schema
) -> dict[Any, Result]:
    """The result of each lookup key of ``command``, from a successful ``reply``."""
    fmt = settings.value
    if fmt is ValueFormat.JSON:
        return _decode_json_reply(command, reply, schema)
    if fmt is ValueFormat.HASH:
        key, rk = command.keys[0], command.redis_keys[0]
        encoding = settings.key_template.encoding
        return {key: _decode_hash(rk, reply, settings.hash_fields, schema, encoding)}
    return {
        key: _decode_string(rk, raw, schema)
        for key, rk, raw in zip(command.keys, command.redis_keys, reply, strict=True)
    }


def _decode_json_reply(command: Command, reply: Any, schema: Schema) -> dict[Any, Result]:
    # The hot loop of a lookup: one JSON parse and one compiled coercion per value,
    # with no other Python-level call unless the value is not a plain object.
    coerce_dict = schema.coerce_dict
    loads = schema.loads  # orjson, or exact decimals when the schema holds one
    results: dict[Any, Result] = {}
    for key, rk, raw in zip(command.keys, command.redis_keys, reply, strict=True):
        if raw is None:
            results[key] = None
            continue
        try:
            document = loads(raw)
        except ValueError as exc:  # JSONDecodeError and invalid UTF-8 are both ValueErrors
            results[key] = _not_json(rk, raw, exc)
            continue
        if type(document) is dict:
            try:
                results[key] = coerce_dict(document)
            except DecodeError as exc:
                results[key] = _in_key(rk, exc)
        else:
            results[key] = _json_rows(rk, document, schema)
    return results


def _not_json(redis_key: bytes, raw: bytes, exc: ValueError) -> DecodeError:
    return DecodeError(
        f"redis key {redis_key!r}: value is not valid JSON ({exc}): {short(raw)}",
        value=raw,
    )


def _json_rows(redis_key: bytes, document: Any, schema: Schema) -> Result:
    if document is None:  # a stored JSON null: a cached miss
        return None
    if isinstance(document, list):
        rows = []
        for item in document:
            row = _coerce(redis_key, item, schema)
            if isinstance(row, DecodeError):
                return row
            rows.append(row)
        return rows
    return _coerce(redis_key, document, schema)


def _decode_string(redis_key: bytes, raw: bytes | None, schema: Schema) -> Result:
    if raw is None:
        return None
    return _coerce(redis_key, {schema.names[0]: raw}, schema)


def _decode_hash(
    redis_key: bytes,
    reply: Any,
    fields: tuple[tuple[str, bytes], ...] | None,
    schema: Schema,
    encoding: str,
) -> Result:
    if fields is None:  # HGETALL: a dict, empty when the key does not exist
        if not reply:
            return None
        document = {name: reply.get(name.encode(encoding)) for name in schema.names}
    else:  # HMGET: values in field order, all None when the key does not exist
        if all(value is None for value in reply):
            return None
        document = {name: value for (name, _), value in zip(fields, reply, strict=True)}
    return _coerce(redis_key, document, schema)


def _coerce(redis_key: bytes, document: Any, schema: Schema) -> Row | DecodeError:
    try:
        return schema.coerce(document)
    except DecodeError as exc:
        return _in_key(redis_key, exc)


def _in_key(redis_key: bytes, exc: DecodeError) -> DecodeError:
    """``exc`` restated for the Redis key whose value it concerns."""
    error = DecodeError(f"redis key {redis_key!r}: {exc}", field=exc.field, value=exc.value)
    error.__cause__ = exc
    return error


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
