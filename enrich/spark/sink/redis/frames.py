"""Arrow batches to Redis commands in RESP, a column at a time (the idempotent writes).

Redis's protocol is binary-safe: an argument goes out as ``$<length>\\r\\n<bytes>\\r\\n``,
nothing escaped. :func:`commands` builds the commands of a whole Arrow batch with Arrow
compute: each column becomes the pieces ``$<n>\\r\\n<name>\\r\\n$<n>\\r\\n<text>\\r\\n``
of its non-null values (empty where null), the pieces are joined row-wise at C level,
and each command's argument count is summed from the columns' validity. A row's
commands say what the row encoder's operation says (``tests/spark/sink/test_sink_frames.py``):

- a stream entry (and a dead letter): ``XADD <stream> * <field> <text> ...``;
- a hash: ``DEL <key>`` then ``HSET <key> <field> <text> ...`` (two replies; the sender
  wraps each chunk of rows in ``MULTI``/``EXEC``, so no reader sees the hash between);
- a JSON value: ``SET <key> <document>``.

Field text is the codec's (:mod:`~enrich.spark.sink.redis.codec`): integer, boolean and string
columns by Arrow's cast (the same digits and ``true``/``false``); finite doubles by
``repr``; every other type value by value. JSON documents alike, a string needing an
escape through ``encode_basestring``. Key templates with a format spec or conversion,
binary key columns and ``Row`` input go through the row encoder (:func:`row_commands`).
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import codec
from .row_writes import RowEncoder

_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_CRLF = b"\r\n"


@dataclass(frozen=True)
class Commands:
    """The commands of a run of rows, in RESP: row ``i``'s are ``payload[i]`` (bytes,
    never null) and Redis answers them with ``replies[i]`` replies."""

    payload: pa.Array
    replies: np.ndarray

    def __len__(self) -> int:
        return len(self.payload)

    def joined(self, start: int, stop: int) -> memoryview:
        """The commands of rows ``start`` to ``stop`` as one buffer (no copy)."""
        array = self.payload
        offsets = np.frombuffer(
            array.buffers()[1], dtype=np.int32, count=array.offset + len(array) + 1
        )
        data = array.buffers()[2]
        begin, end = offsets[array.offset + start], offsets[array.offset + stop]
        return memoryview(data)[begin:end] if data is not None else memoryview(b"")


def is_columnar(encoder: RowEncoder) -> bool:
    """Whether :func:`commands` builds this encoder's commands (else: the row encoder)."""
    key = encoder.settings.key
    if key is None:
        return True
    pieces = list(string.Formatter().parse(key))
    return all(not spec and not conversion for _, _, spec, conversion in pieces)


def commands(encoder: RowEncoder, batch: pa.RecordBatch) -> Commands | None:
    """The commands writing each row of ``batch``, or None when the batch must go row by
    row (a binary key column).

    Raises:
        ValueError: a row needs a key and a key column is null (the row encoder's
            message, naming the column, the template and the row).
    """
    settings = encoder.settings
    rows = len(batch)
    if settings.stream is not None:
        command: pa.Array | None = _xadd(encoder, batch, settings.stream)
        replies = np.ones(rows, dtype=np.int64)
    else:
        key = key_texts(encoder, batch)
        if key is None:
            return None
        if settings.value == "json":
            command = _join(b"*3\r\n$3\r\nSET\r\n", _bulk(key), _bulk(_documents(encoder, batch)))
            replies = np.ones(rows, dtype=np.int64)
        else:
            fields, count = _fields(encoder, batch)
            head = _join(b"*", _digits(pc.add(count, 2)), b"\r\n$4\r\nHSET\r\n", _bulk(key))
            command = _join(b"*2\r\n$3\r\nDEL\r\n", _bulk(key), head, fields)
            replies = np.full(rows, 2, dtype=np.int64)
    if encoder.error_index is not None:
        assert settings.dead_letter is not None
        failed = pc.is_valid(batch.column(encoder.error_index))
        command = pc.if_else(failed, _xadd(encoder, batch, settings.dead_letter), command)
        replies = np.where(failed.to_numpy(zero_copy_only=False), 1, replies)
    assert command is not None
    if command.null_count:  # a key column null in a row that needs its key
        row = pc.index(pc.is_null(command), True).as_py()
        encoder.encode(next(iter(_values(batch.slice(row, 1)))))  # raises, naming it
        raise AssertionError(f"row {row} has no command")  # pragma: no cover
    return Commands(command, replies)


def row_commands(encoder: RowEncoder, rows: Iterable[Sequence[Any]]) -> Commands:
    """The same commands, row by row through the row encoder (every row, any target)."""
    payload: list[bytes] = []
    replies: list[int] = []
    for row in rows:
        kind, key, *rest = encoder.encode(row)
        if kind == "x":
            payload.append(_pack([b"XADD", key, b"*", *rest]))
        elif kind == "h":
            payload.append(_pack([b"DEL", key]) + _pack([b"HSET", key, *rest]))
        else:
            payload.append(_pack([b"SET", key, *rest]))
        replies.append(2 if kind == "h" else 1)
    return Commands(pa.array(payload, pa.binary()), np.array(replies, dtype=np.int64))


def _values(batch: pa.RecordBatch) -> Iterable[tuple[Any, ...]]:
    return zip(*(column.to_pylist() for column in batch.columns), strict=True)


def _pack(args: Sequence[str | bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg.encode("utf-8") if isinstance(arg, str) else arg
        parts.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(parts)


def _xadd(encoder: RowEncoder, batch: pa.RecordBatch, stream: str) -> pa.Array:
    fields, count = _fields(encoder, batch)
    name = stream.encode("utf-8")
    head = b"\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n" % (len(name), name)
    return _join(b"*", _digits(pc.add(count, 3)), head, fields)


def _fields(encoder: RowEncoder, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
    """Each row's ``field value`` pairs of its non-null columns, and their number of
    arguments. An all-null row keeps its first column, empty (an entry needs a field)."""
    pieces, counts = [], []
    for index, name in enumerate(encoder.columns):
        text = field_texts(batch.column(index), encoder.field_type(index))
        pieces.append(pc.fill_null(_join(_bulk_literal(name), _bulk(text)), b""))
        counts.append(pc.multiply(pc.cast(pc.is_valid(text), pa.int64()), 2))
    fields = pieces[0] if len(pieces) == 1 else _join(*pieces)
    count = counts[0] if len(counts) == 1 else _sum(counts)
    none = pc.equal(count, 0)
    empty = pa.scalar(_bulk_literal(encoder.columns[0]) + b"$0\r\n\r\n", pa.binary())
    return pc.if_else(none, empty, fields), pc.if_else(none, 2, count)


def key_texts(encoder: RowEncoder, batch: pa.RecordBatch) -> pa.Array | None:
    """Each row's key from the template (null where a key column is null), or None when
    a key column is binary (the row encoder renders its bytes)."""
    assert encoder.settings.key is not None
    parts: list[Any] = []
    for literal, name, _, _ in string.Formatter().parse(encoder.settings.key):
        if literal:
            parts.append(literal.encode("utf-8"))
        if name is not None:
            index = encoder.columns.index(name)
            kind = batch.column(index).type
            if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
                return None
            parts.append(field_texts(batch.column(index), encoder.field_type(index)))
    if len(parts) == 1:  # the template is one column
        key: pa.Array = parts[0]
        return key
    return _join(*parts)


def field_texts(column: pa.Array, spark_type: Any) -> pa.Array:
    """The field text of each value as the codec writes it (binary; null stays null)."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return pc.cast(pc.cast(column, pa.string()), pa.binary())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.cast(column, pa.binary())
    if pa.types.is_floating(kind) and pc.all(pc.is_finite(column)).as_py() is not False:
        return _finite_floats(column)
    encode = codec.field_encoder(spark_type)
    texts = (None if v is None else encode(v) for v in column.to_pylist())
    return pa.array(
        [t if t is None or isinstance(t, bytes) else t.encode("utf-8") for t in texts],
        pa.binary(),
    )


def _json_texts(column: pa.Array, spark_type: Any) -> pa.Array:
    """The JSON text of each value as the codec writes it (binary; null stays null)."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return pc.cast(pc.cast(column, pa.string()), pa.binary())
    is_text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if is_text and not pc.any(pc.match_substring_regex(column, _NEEDS_ESCAPE)).as_py():
        return _join(b'"', pc.cast(column, pa.binary()), b'"')
    if pa.types.is_floating(kind) and pc.all(pc.is_finite(column)).as_py() is not False:
        return _finite_floats(column)
    encode = codec.json_encoder(spark_type)
    texts = [None if v is None else encode(v).encode("utf-8") for v in column.to_pylist()]
    return pa.array(texts, pa.binary())


def _finite_floats(column: pa.Array) -> pa.Array:
    """``repr`` of each value (every one finite; null stays null), at C speed where it
    can: Arrow's cast writes the same shortest round-trip digits as ``repr``, but not
    always in its notation (``591`` for ``591.0``, ``1e-05`` as ``0.00001``, exponents
    from 1e15 on), so a text is kept only where ``repr`` would also be positional with a
    fraction (1e-4 <= |x| < 1e16) and Arrow wrote ``digits.digits``; the rest is
    ``repr``'d (a float32 as its double value, as the codec writes it)."""
    values = pc.cast(column, pa.float64())
    text = pc.cast(values, pa.string())
    size = pc.abs(values)
    plain = pc.and_(
        pc.and_(pc.greater_equal(size, 1e-4), pc.less(size, 1e16)),
        pc.match_substring_regex(text, r"^-?[0-9]+\.[0-9]+$"),
    )
    odd = pc.and_(pc.invert(plain), values.is_valid())
    if pc.any(odd).as_py():
        fixed = pa.array(map(repr, values.filter(odd).to_pylist()), pa.string())
        text = pc.replace_with_mask(text, odd, fixed)
    return pc.cast(text, pa.binary())


def _documents(encoder: RowEncoder, batch: pa.RecordBatch) -> pa.Array:
    """Each row as a JSON object, every column by name (nulls as ``null``)."""
    pieces = []
    for index, name in enumerate(encoder.columns):
        text = _json_texts(batch.column(index), encoder.field_type(index))
        member = encode_basestring(name).encode("utf-8") + b":"
        pieces.append(_join(member, pc.fill_null(text, b"null")))
    members = pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(*pieces, b",")
    return _join(b"{", members, b"}")


def _bulk(texts: pa.Array) -> pa.Array:
    """Each text as a RESP bulk string (null stays null)."""
    return _join(b"$", _digits(pc.binary_length(texts)), _CRLF, texts, _CRLF)


def _bulk_literal(text: str) -> bytes:
    raw = text.encode("utf-8")
    return b"$%d\r\n%s\r\n" % (len(raw), raw)


def _digits(numbers: pa.Array) -> pa.Array:
    return pc.cast(pc.cast(numbers, pa.string()), pa.binary())


def _sum(arrays: list[pa.Array]) -> pa.Array:
    total = arrays[0]
    for array in arrays[1:]:
        total = pc.add(total, array)
    return total


def _join(*parts: Any) -> pa.Array:
    """Row-wise concatenation of arrays and byte literals (null where any part is)."""
    return pc.binary_join_element_wise(*parts, b"")
