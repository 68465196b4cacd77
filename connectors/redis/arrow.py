"""The columnar lookup of a RedisLookup: Arrow keys to MGET, JSON values decoded in bulk.

Redis keys are built with Arrow compute from the key template's prefix and suffix; the
keys go out as MGETs (per slot on a cluster, pipelined per ``max_batch``); the JSON
objects that came back are joined with newlines and decoded at once by Arrow's JSON
reader against the dimension's Arrow struct. Everything the bulk decoder cannot take
exactly as the per-value decoder would, goes through that per-value decoder
(:func:`codec.decode`), so every key gets the same outcome and the same ``DecodeError``
text as with ``lookup_many``:

* values that are not a JSON object (arrays for 1:N joins, ``null``, garbage);
* a whole request whose bulk decode fails, or reads a ``NaN``/``Infinity`` token
  (Arrow takes them, the per-value decoder refuses them), or yields a row count other
  than the number of objects;
* every value of a schema with a type outside :data:`BULK_TYPES`.

Hash and string values are read by ``lookup_many`` and converted to columns.

:func:`fetch_arrow` is the same lookup split at the reply: the MGETs now, the decoding as
a step for later (the lane runs it on the Spark task thread, see
:class:`enrich.lookup.columnar.ColumnarSource`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from enrich.lookup.columnar import ColumnarAnswer, Decode, answer_from_mapping

from . import client, codec
from .codec import Command
from .config import LookupSettings, ValueFormat
from .connection import Packed

if TYPE_CHECKING:
    from . import RedisLookup

# Arrow types whose JSON reading by Arrow matches the per-value decoder exactly (checked
# by tests/redis/test_arrow.py): any mismatch there is an error that sends the request
# to the per-value decoder, never a different value.
BULK_TYPES = (pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.float32(), pa.bool_())


async def lookup_arrow(
    source: RedisLookup, keys: pa.Array, struct_type: pa.StructType
) -> ColumnarAnswer:
    """``source.lookup_arrow``: see the module docstring."""
    decode = await fetch_arrow(source, keys, struct_type)
    return decode()


async def fetch_arrow(source: RedisLookup, keys: pa.Array, struct_type: pa.StructType) -> Decode:
    """``source.fetch_arrow``: the requests of :func:`lookup_arrow`, made now, and its
    decoding, returned as a step to run later on any thread (it reads only the replies
    and settings captured here)."""
    settings: LookupSettings = source._settings
    if settings.value is not ValueFormat.JSON or len(keys) == 0:
        return await _general(source, keys, struct_type)
    text = _key_text(settings, keys)
    if text is None:  # keys the template cannot take in bulk: the general path
        return await _general(source, keys, struct_type)
    endpoint = settings.connection.endpoint
    if endpoint.cluster or endpoint.is_sentinel:
        replies = await _mget_by_command(source, keys, _rendered(settings, text))
    else:
        replies = await _mget_packed(source, keys, text)
    if replies is None:  # one denied key refuses a whole MGET: ask key by key
        return await _general(source, keys, struct_type)
    values, errors = replies
    redis_keys = partial(_rendered, settings, text)  # only a value that fails needs them
    return partial(_decoded, values, redis_keys, settings, source.schema, struct_type, errors)


Replies = tuple[list[bytes | None], dict[int, BaseException]]


async def _mget_packed(source: RedisLookup, keys: pa.Array, text: pa.BinaryArray) -> Replies | None:
    """One pipeline of MGETs of at most ``max_batch`` keys each, framed in RESP by Arrow
    compute and sent as they are (:class:`~connectors.redis.connection.Packed`): no key
    becomes a Python object. The values, aligned with the keys, and the errors by key
    position; None when the server denied a command (ACL)."""
    settings = source._settings
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
            if client.is_denied(reply):
                return None
            for position in range(start, stop):
                errors[position] = client.translate(reply, endpoint, key=keys[position].as_py())
            values += [None] * (stop - start)
        else:
            values += reply
    return values, errors


async def _mget_by_command(
    source: RedisLookup, keys: pa.Array, redis_keys: pa.BinaryArray
) -> Replies | None:
    """The MGETs of :func:`_mget_packed` planned key by key (per slot on a cluster),
    in pipelines of at most ``max_batch`` keys, concurrently."""
    settings = source._settings
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


async def _general(source: RedisLookup, keys: pa.Array, struct_type: pa.StructType) -> Decode:
    """``lookup_many``'s answer, converted to columns by the decode step."""
    listed = keys.to_pylist()
    found = await source.lookup_many(listed)
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
    """The answer for MGET ``values`` (None: no such key), aligned with them.

    The checks and joins here are C-level bytes operations rather than Arrow compute:
    on a request's few hundred values Arrow's per-call setup costs more (measured).
    """
    count = len(values)
    if not all(f.type in BULK_TYPES for f in struct_type):
        return _per_value(list(range(count)), values, redis_keys, settings, schema, struct_type)
    try:  # join refuses None (a missing key) at C speed: the common case costs no scan
        blob = b"\n".join(values)  # type: ignore[arg-type]
        found: Sequence[int] = range(count)
        present = values
    except TypeError:
        found = [i for i, value in enumerate(values) if value is not None]
        present = [values[i] for i in found]
        blob = b"\n".join(present)  # type: ignore[arg-type]
    if not present:  # every key missing
        return ColumnarAnswer(pa.nulls(count, type=struct_type))
    size = len(present)
    # Every value starts an object and holds no newline: one line per value.
    if blob[:1] == b"{" and blob.count(b"\n") == size - 1 == blob.count(b"\n{"):
        rows = _read_bulk(blob, size, struct_type)
        if rows is not None:
            return ColumnarAnswer(_spread(rows, found, count))
    # The general case: objects on one line in bulk, the rest (arrays for 1:N, JSON
    # null, garbage, pretty-printed objects) one value at a time.
    texts: list[bytes] = present  # type: ignore[assignment]
    objects = [i for i, v in zip(found, texts, strict=True) if v[:1] == b"{" and b"\n" not in v]
    rows = _read_bulk(b"\n".join(values[i] or b"" for i in objects), len(objects), struct_type)
    if rows is None:
        return _per_value(found, values, redis_keys, settings, schema, struct_type)
    bulk = set(objects)
    others = [i for i in found if i not in bulk]
    rest = _per_value(others, values, redis_keys, settings, schema, struct_type)
    index: list[int | None] = [None] * count
    for j, i in enumerate(objects):
        index[i] = j
    for i in others:
        index[i] = len(objects) + i
    merged = pa.concat_arrays([rows, rest.rows]).take(pa.array(index, pa.int64()))
    return ColumnarAnswer(merged, rest.errors, rest.multi)


def _spread(rows: pa.StructArray, positions: Sequence[int], count: int) -> pa.StructArray:
    """``rows[j]`` moved to ``positions[j]`` of ``count`` structs, the others null."""
    if len(positions) == count:
        return rows
    index: list[int | None] = [None] * count
    for j, i in enumerate(positions):
        index[i] = j
    spread: pa.StructArray = rows.take(pa.array(index, pa.int64()))
    return spread


def _read_bulk(blob: bytes, lines: int, struct_type: pa.StructType) -> pa.StructArray | None:
    """``lines`` JSON objects, one per line of ``blob``, decoded by Arrow; None when
    that might not be exactly the per-value decoder's result."""
    if lines == 0:
        empty: pa.StructArray = pa.array([], type=struct_type)
        return empty
    # Arrow takes NaN and Infinity tokens, the per-value path not. One byte is found
    # at memchr speed, a word is searched for only where its first letter occurs.
    if (b"N" in blob and b"NaN" in blob) or (b"I" in blob and b"Infinity" in blob):
        return None
    options = _parse_options(struct_type)
    # One block holding the whole blob, read on this thread: measured 4-7x faster than
    # the default 1 MB blocks for a request's few hundred values (a per-call cost), and
    # the reader's thread pool only adds contention to a Spark worker's cores.
    read = pj.ReadOptions(use_threads=False, block_size=len(blob) + 1)
    try:
        table = pj.read_json(pa.BufferReader(blob), read_options=read, parse_options=options)
    except (pa.ArrowInvalid, UnicodeDecodeError, ValueError):
        return None
    if table.num_rows != lines:  # a line held more than one object
        return None
    arrays = [table.column(i).combine_chunks() for i in range(table.num_columns)]
    rows = pa.StructArray.from_arrays(arrays, fields=list(struct_type))
    try:
        rows.validate(full=True)  # the reader does not check UTF-8; the per-value path does
    except pa.ArrowInvalid:
        return None
    return rows


_OPTIONS: dict[pa.StructType, pj.ParseOptions] = {}


def _parse_options(struct_type: pa.StructType) -> pj.ParseOptions:
    options = _OPTIONS.get(struct_type)
    if options is None:
        options = _OPTIONS[struct_type] = pj.ParseOptions(
            explicit_schema=pa.schema(list(struct_type)), unexpected_field_behavior="ignore"
        )
    return options


def _per_value(
    positions: Sequence[int],
    values: list[bytes | None],
    redis_keys: Sequence[bytes] | Callable[[], pa.Array],
    settings: LookupSettings,
    schema: Any,
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The per-value decoder's answer for the values at ``positions``, aligned with
    ``values`` (null structs at the other positions)."""
    if callable(redis_keys):
        named = tuple(redis_keys().take(pa.array(positions, pa.int64())).to_pylist())
    else:
        named = tuple(redis_keys[p] for p in positions)
    command = Command(("MGET",), tuple(positions), named)
    decoded = codec.decode(command, [values[p] for p in positions], settings, schema)
    return answer_from_mapping(range(len(values)), decoded, struct_type)
