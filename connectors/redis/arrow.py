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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from enrich.lookup.columnar import ColumnarAnswer, answer_from_mapping, place

from . import client, codec
from .codec import Command
from .config import LookupSettings, ValueFormat

if TYPE_CHECKING:
    from . import RedisLookup

# Arrow types whose JSON reading by Arrow matches the per-value decoder exactly (checked
# by tests/redis/test_arrow.py): any mismatch there is an error that sends the request
# to the per-value decoder, never a different value.
BULK_TYPES = (pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.float32(), pa.bool_())

_NOT_FINITE = "NaN|Infinity"


async def lookup_arrow(
    source: RedisLookup, keys: pa.Array, struct_type: pa.StructType
) -> ColumnarAnswer:
    """``source.lookup_arrow``: see the module docstring."""
    settings: LookupSettings = source._settings
    if settings.value is not ValueFormat.JSON or len(keys) == 0:
        listed = keys.to_pylist()
        return answer_from_mapping(listed, await source.lookup_many(listed), struct_type)
    redis_keys = _render(settings, keys)
    if redis_keys is None:  # keys the template cannot take in bulk: the general path
        listed = keys.to_pylist()
        return answer_from_mapping(listed, await source.lookup_many(listed), struct_type)
    endpoint = settings.connection.endpoint
    wanted = list(zip(range(len(redis_keys)), redis_keys, strict=True))
    commands = codec.plan(settings, wanted, cluster=endpoint.cluster)
    batches = codec.pack(commands, settings.max_batch)
    handle = client.client_for(settings.connection)
    replies = await client.execute(handle, batches, endpoint)
    values: list[Any] = [None] * len(redis_keys)
    errors: dict[int, BaseException] = {}
    denied = False
    for batch, batch_replies in zip(batches, replies, strict=True):
        for command, reply in zip(batch, batch_replies, strict=True):
            if isinstance(reply, Exception):
                if len(command.keys) > 1 and client.is_denied(reply):
                    denied = True
                    continue
                for position in command.keys:
                    errors[position] = client.translate(reply, endpoint, key=keys[position].as_py())
            elif not endpoint.cluster and len(batches) == 1 and len(commands) == 1:
                values = reply
            else:
                for position, raw in zip(command.keys, reply, strict=True):
                    values[position] = raw
    if denied:  # one denied key refuses a whole MGET: let the general path ask key by key
        listed = keys.to_pylist()
        return answer_from_mapping(listed, await source.lookup_many(listed), struct_type)
    answer = decode_json(values, redis_keys, settings, source.schema, struct_type)
    answer.errors.update(errors)
    return answer


def _render(settings: LookupSettings, keys: pa.Array) -> list[bytes] | None:
    """The Redis keys, built with Arrow compute for a one-placeholder template."""
    template = settings.key_template
    if template.arity != 1 or template.encoding.replace("-", "").lower() != "utf8":
        return None
    if not (pa.types.is_integer(keys.type) or pa.types.is_string(keys.type)):
        return None
    prefix, suffix = template.literals
    text = pc.cast(keys, pa.string())
    joined = pc.binary_join_element_wise(
        pa.scalar(prefix, pa.binary()),
        pc.cast(text, pa.binary()),
        pa.scalar(suffix, pa.binary()),
        b"",
    )
    rendered: list[bytes] = joined.to_pylist()
    return rendered


def decode_json(
    values: list[bytes | None],
    redis_keys: list[bytes],
    settings: LookupSettings,
    schema: Any,
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The answer for MGET ``values`` (None: no such key), aligned with them."""
    count = len(values)
    if not all(f.type in BULK_TYPES for f in struct_type):
        return _per_value(range(count), values, redis_keys, settings, schema, struct_type)
    raw = pa.array(values, type=pa.binary())
    objects = pc.fill_null(pc.starts_with(raw, "{"), False)
    bulk = raw.filter(objects)
    rows = _read_bulk(bulk, struct_type)
    if rows is None:
        return _per_value(range(count), values, redis_keys, settings, schema, struct_type)
    if len(bulk) + raw.null_count == count:  # every present value was an object
        return ColumnarAnswer(place(rows, objects))
    # The rest (arrays, JSON null, garbage) one by one, then merged in by position.
    others = pc.and_(raw.is_valid(), pc.invert(objects))
    positions = pc.indices_nonzero(others).to_pylist()
    rest = _per_value(positions, values, redis_keys, settings, schema, struct_type)
    order = pc.if_else(
        objects,
        _running(objects, 0),
        pc.if_else(others, _running(others, len(bulk)), pa.scalar(None, pa.int64())),
    )
    merged = pa.concat_arrays([rows, rest.rows]).take(order)
    errors = {positions[i]: e for i, e in rest.errors.items()}
    multi = {positions[i]: m for i, m in rest.multi.items()}
    return ColumnarAnswer(merged, errors, multi)


def _running(mask: pa.Array, start: int) -> pa.Array:
    """For each true entry of ``mask``, ``start`` plus how many true entries precede it."""
    return pc.add(pc.cumulative_sum(pc.cast(mask, pa.int64())), start - 1)


def _read_bulk(bulk: pa.Array, struct_type: pa.StructType) -> pa.StructArray | None:
    """The objects decoded by Arrow, or None when that is not exactly the per-value result."""
    if len(bulk) == 0:
        return pa.array([], type=struct_type)
    if pc.any(pc.match_substring_regex(bulk, _NOT_FINITE)).as_py():
        return None
    lines = pa.ListArray.from_arrays(pa.array([0, len(bulk)], pa.int32()), bulk)
    blob = pc.binary_join(lines, b"\n")[0].as_buffer()
    options = pj.ParseOptions(
        explicit_schema=pa.schema(list(struct_type)), unexpected_field_behavior="ignore"
    )
    read = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, blob.size + 1))
    try:
        table = pj.read_json(pa.BufferReader(blob), read_options=read, parse_options=options)
    except (pa.ArrowInvalid, UnicodeDecodeError, ValueError):
        return None
    if table.num_rows != len(bulk):  # a value held more than one object
        return None
    arrays = [table.column(i).combine_chunks() for i in range(table.num_columns)]
    rows = pa.StructArray.from_arrays(arrays, fields=list(struct_type))
    try:
        rows.validate(full=True)  # the reader does not check UTF-8; the per-value path does
    except pa.ArrowInvalid:
        return None
    return rows


def _per_value(
    positions: Any,
    values: list[bytes | None],
    redis_keys: list[bytes],
    settings: LookupSettings,
    schema: Any,
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The per-value decoder's answer for the values at ``positions``, aligned with
    ``positions`` (its entry ``i`` concerns ``values[positions[i]]``)."""
    listed = list(positions)
    command = Command(("MGET",), tuple(listed), tuple(redis_keys[p] for p in listed))
    decoded = codec.decode(command, [values[p] for p in listed], settings, schema)
    return answer_from_mapping(listed, decoded, struct_type)
