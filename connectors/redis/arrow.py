"""The columnar lookup of a RedisLookup: Arrow keys to MGET, JSON values decoded in bulk.

Redis keys are built with Arrow compute from the key template's prefix and suffix. On a
standalone server they are framed in RESP by Arrow compute too and go out as one
pipeline of MGETs of at most ``max_batch`` keys each, on one connection, with no key
ever a Python object (:class:`~connectors.redis.connection.Packed`); on a cluster or
through Sentinel, as MGETs planned key by key (per slot on a cluster). The JSON
objects that came back are joined with newlines and decoded at once by Arrow's JSON
reader against the dimension's Arrow struct (:func:`enrich.spi.decode_texts`).
Everything the bulk decoder cannot take exactly as the per-value decoder would, goes
through that per-value decoder (:func:`codec.decode`), so every key gets the same
outcome and the same ``DecodeError`` text as with ``lookup_many`` (but for the two rare
exceptions :mod:`enrich.spi` names):

* values that are not a JSON object (arrays for 1:N joins, ``null``, garbage);
* a whole request whose bulk decode fails, or reads a ``NaN``/``Infinity`` token
  (Arrow takes them, the per-value decoder refuses them), or yields a row count other
  than the number of objects;
* a row whose ``NOT NULL`` field is null or missing;
* every value of a schema with a type the bulk decoder does not take (see
  :func:`enrich.spi.decode_texts`).

Hash and string values are read by ``lookup_many`` and converted to columns.
A value larger than ``max_value_bytes`` fails its own key (``kind="too_large"``), as
with ``lookup_many``.

:func:`fetch_arrow` is the same lookup split at the reply: the MGETs now, the decoding as
a step for later (the lane runs it on the Spark task thread, see
:class:`enrich.spi.ColumnarSource`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from enrich.spi import ColumnarAnswer, Decode, answer_from_mapping, decode_texts

from . import bounds, client, codec
from .codec import Command
from .config import LookupSettings, ValueFormat
from .connection import Packed

# The source's own lookup_many (the general path of fetch_arrow).
LookupMany = Callable[[list[Any]], Awaitable[Mapping[Any, Any]]]


async def fetch_arrow(
    settings: LookupSettings,
    schema: Any,
    lookup_many: LookupMany,
    keys: pa.Array,
    struct_type: pa.StructType,
) -> Decode:
    """``RedisLookup.fetch_arrow``: the requests of its ``lookup_arrow``, made now, and
    their decoding, returned as a step to run later on any thread (it reads only the
    replies and settings captured here). ``lookup_many`` is the source's own, for keys
    the bulk path cannot take."""
    if settings.value is not ValueFormat.JSON or len(keys) == 0:
        return await _general(lookup_many, keys, struct_type)
    text = _key_text(settings, keys)
    if text is None:  # keys the template cannot take in bulk: the general path
        return await _general(lookup_many, keys, struct_type)
    endpoint = settings.connection.endpoint
    if endpoint.cluster or endpoint.is_sentinel:
        replies = await mget_by_command(settings, keys, _rendered(settings, text))
    else:
        replies = await _mget_packed(settings, keys, text)
    if replies is None:  # one denied key refuses a whole MGET: ask key by key
        return await _general(lookup_many, keys, struct_type)
    values, errors = replies
    redis_keys = partial(_rendered, settings, text)  # only a value that fails needs them
    fail_oversized(values, errors, keys, redis_keys, settings)
    return partial(_decoded, values, redis_keys, settings, schema, struct_type, errors)


Replies = tuple[list[bytes | None], dict[int, BaseException]]


def fail_oversized(
    values: list[bytes | None],
    errors: dict[int, BaseException],
    keys: pa.Array,
    redis_keys: Callable[[], pa.Array],
    settings: LookupSettings,
) -> None:
    """Fail, in place, each key whose value is larger than ``max_value_bytes``, with the
    error ``lookup_many`` gives it (:func:`bounds.split_oversized`); its value becomes a
    miss for the decoder. The check is C-level; only an oversized value costs more."""
    limit = settings.max_value_bytes
    if max(map(len, filter(None, values)), default=0) <= limit:
        return
    listed = keys.to_pylist()
    command = Command(("MGET",), tuple(listed), tuple(redis_keys().to_pylist()))
    where = f"redis at {settings.connection.endpoint.address}"
    _, _, failures = bounds.split_oversized(command, values, settings.value, limit, where)
    for position, key in enumerate(listed):
        failure = failures.get(key)
        if failure is not None:
            errors[position] = failure
            values[position] = None


async def _mget_packed(
    settings: LookupSettings, keys: pa.Array, text: pa.BinaryArray
) -> Replies | None:
    """One pipeline of MGETs of at most ``max_batch`` keys each, framed in RESP by Arrow
    compute and sent as they are (:class:`~connectors.redis.connection.Packed`): no key
    becomes a Python object. The values, aligned with the keys, and the errors by key
    position; None when the server denied a command (ACL)."""
    endpoint = settings.connection.endpoint
    framed = _framed(settings, text)
    _, offsets_buffer, data = framed.buffers()
    count, size = len(framed), settings.max_batch
    offsets = pa.Array.from_buffers(pa.int32(), count + 1, [None, offsets_buffer], 0, framed.offset)
    starts = list(range(0, count, size))
    bounds = offsets.take(pa.array([*starts, count], pa.int64())).to_pylist()
    commands = []
    for n, start in enumerate(starts):
        # Each framed key ends with the next one's "$": drop the last, add the first.
        payload = b"$" + data[bounds[n] : bounds[n + 1] - 1].to_pybytes()
        commands.append(Command(("MGET", Packed(payload, min(size, count - start))), (), ()))
    handle = client.client_for(settings.connection)
    (replies,) = await client.execute(handle, [commands], endpoint)
    values: list[bytes | None] = []
    errors: dict[int, BaseException] = {}
    for start, reply in zip(starts, replies, strict=True):
        stop = min(start + size, count)
        if isinstance(reply, Exception):
            if stop - start > 1 and client.is_denied(reply):
                return None
            for position in range(start, stop):
                errors[position] = client.translate(reply, endpoint, key=keys[position].as_py())
            values += [None] * (stop - start)
        else:
            values += reply
    return values, errors


async def mget_by_command(
    settings: LookupSettings, keys: pa.Array, redis_keys: pa.BinaryArray
) -> Replies | None:
    """The MGETs of :func:`_mget_packed` planned key by key (per slot on a cluster),
    in pipelines of at most ``max_batch`` keys, concurrently."""
    endpoint = settings.connection.endpoint
    wanted = list(enumerate(redis_keys.to_pylist()))
    commands = codec.plan(settings, wanted, cluster=endpoint.cluster)
    batches = codec.pack(commands, settings.max_batch)
    handle = client.client_for(settings.connection)
    replies = await client.execute(handle, batches, endpoint)
    values: list[Any] = [None] * len(wanted)
    errors: dict[int, BaseException] = {}
    for batch, batch_replies in zip(batches, replies, strict=True):
        for command, reply in zip(batch, batch_replies, strict=True):
            if isinstance(reply, Exception):
                if len(command.keys) > 1 and client.is_denied(reply):
                    return None
                for position in command.keys:
                    errors[position] = client.translate(reply, endpoint, key=keys[position].as_py())
            else:
                for position, raw in zip(command.keys, reply, strict=True):
                    values[position] = raw
    return values, errors


async def _general(lookup_many: LookupMany, keys: pa.Array, struct_type: pa.StructType) -> Decode:
    """``lookup_many``'s answer, converted to columns by the decode step."""
    listed = keys.to_pylist()
    found = await lookup_many(listed)
    return partial(answer_from_mapping, listed, found, struct_type)


def _decoded(
    values: list[bytes | None],
    redis_keys: Callable[[], pa.Array],
    settings: LookupSettings,
    schema: Any,
    struct_type: pa.StructType,
    errors: dict[int, BaseException],
) -> ColumnarAnswer:
    answer = decode_json(values, redis_keys, settings, schema, struct_type)
    answer.errors.update(errors)
    return answer


def _key_text(settings: LookupSettings, keys: pa.Array) -> pa.BinaryArray | None:
    """What a one-placeholder template puts in its placeholder for each key (UTF-8), or
    None when the template or the key type is not for the bulk path."""
    template = settings.key_template
    if template.arity != 1 or template.encoding.replace("-", "").lower() != "utf8":
        return None
    if not (pa.types.is_integer(keys.type) or pa.types.is_string(keys.type)):
        return None
    text: pa.BinaryArray = pc.cast(pc.cast(keys, pa.string()), pa.binary())
    return text


def _rendered(settings: LookupSettings, text: pa.BinaryArray) -> pa.BinaryArray:
    """The Redis keys: the template's literals around each key's text."""
    prefix, suffix = settings.key_template.literals
    rendered: pa.BinaryArray = pc.binary_join_element_wise(
        pa.scalar(prefix, pa.binary()), text, pa.scalar(suffix, pa.binary()), b""
    )
    return rendered


def _framed(settings: LookupSettings, text: pa.BinaryArray) -> pa.BinaryArray:
    """Each Redis key as a RESP bulk string, ``$<length>\\r\\n<key>\\r\\n``, shifted by
    one byte: each element starts with the length and ends with the next one's ``$``.
    (Four parts instead of five: the join costs per part and row.)"""
    prefix, suffix = settings.key_template.literals
    lengths = pc.add(pc.binary_length(text), len(prefix) + len(suffix))
    framed: pa.BinaryArray = pc.binary_join_element_wise(
        pc.cast(pc.cast(lengths, pa.string()), pa.binary()),
        pa.scalar(b"\r\n" + prefix, pa.binary()),
        text,
        pa.scalar(suffix + b"\r\n$", pa.binary()),
        b"",
    )
    return framed


def decode_json(
    values: list[bytes | None],
    redis_keys: Sequence[bytes] | Callable[[], pa.Array],
    settings: LookupSettings,
    schema: Any,
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The answer for MGET ``values`` (None: no such key), aligned with them: decoded
    in bulk by :func:`enrich.spi.decode_texts`, the rest by
    :func:`codec.decode`, whose errors name the Redis key."""
    per_value = partial(
        _per_value,
        values=values,
        redis_keys=redis_keys,
        settings=settings,
        schema=schema,
        struct_type=struct_type,
    )
    return decode_texts(values, struct_type, schema, per_value)


def _per_value(
    positions: Sequence[int],
    *,
    values: list[bytes | None],
    redis_keys: Sequence[bytes] | Callable[[], pa.Array],
    settings: LookupSettings,
    schema: Any,
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The per-value decoder's answer for the values at ``positions``, aligned with
    ``positions``."""
    if callable(redis_keys):
        named = tuple(redis_keys().take(pa.array(positions, pa.int64())).to_pylist())
    else:
        named = tuple(redis_keys[p] for p in positions)
    command = Command(("MGET",), tuple(positions), named)
    decoded = codec.decode(command, [values[p] for p in positions], settings, schema)
    return answer_from_mapping(positions, decoded, struct_type)
