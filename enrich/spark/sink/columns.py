"""Arrow batches to staged operations a column at a time (stream entries and hashes).

The transactional writer stages each row as a packed operation
(:func:`enrich.spark.sink.codec.pack`): ``["x", stream, field, value, ...]`` or
``["h", key, field, value, ...]``. :func:`staged_operations` builds them for a whole
Arrow batch with Arrow compute: each column becomes its ``,"name","text"`` pieces (empty
where null), and the pieces are joined row-wise at C level. Integer, boolean and
string columns are converted by Arrow (their text is Arrow's cast, the same digits and
``true``/``false`` as the row encoder; strings holding a quote, a backslash or a control
character go the Python way); every other type is encoded value by value by the codec,
then escaped. What it stages decodes to exactly what the row encoder stages
(``tests/spark/test_sink_columns.py``). JSON documents (``value=json``) and key
templates with a format spec or conversion go row by row.
"""

from __future__ import annotations

import re
import string
from json.encoder import encode_basestring
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import codec
from .row_writes import RowEncoder

_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_ESCAPE = re.compile(rb'[\x00-\x1f"\\]')


def is_columnar(encoder: RowEncoder) -> bool:
    """Whether :func:`staged_operations` builds this encoder's operations."""
    settings = encoder.settings
    if settings.stream is not None:
        return True
    if settings.value != "hash" or settings.key is None:
        return False
    pieces = list(string.Formatter().parse(settings.key))
    return all(not spec and not conversion for _, _, spec, conversion in pieces)


def staged_operations(encoder: RowEncoder, batch: pa.RecordBatch) -> list[bytes] | None:
    """The packed operation of each row of ``batch``, or None when the batch must go row
    by row (a null key column: the row encoder names it in its error; a binary key
    column)."""
    settings = encoder.settings
    columns = encoder.columns
    texts = [_text(batch.column(i), encoder.field_type(i)) for i in range(len(columns))]
    pieces = [
        pc.fill_null(
            pc.binary_join_element_wise(b"," + _quoted(name) + b',"', text, b'"', b""), b""
        )
        for name, text in zip(columns, texts, strict=True)
    ]
    fields = pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(*pieces, b"")
    # An entry needs a field: an all-null row keeps its first column, empty.
    empty = pa.scalar(b"," + _quoted(columns[0]) + b',""', pa.binary())
    fields = pc.if_else(pc.equal(pc.binary_length(fields), 0), empty, fields)
    if settings.stream is not None:
        head: Any = pa.scalar(b'["x",' + _quoted(settings.stream), pa.binary())
    else:
        head = _key_heads(encoder, batch, texts)
        if head is None:
            return None
    if encoder.error_index is not None:
        assert settings.dead_letter is not None
        dead = pa.scalar(b'["x",' + _quoted(settings.dead_letter), pa.binary())
        failed = pc.is_valid(batch.column(encoder.error_index))
        head = pc.if_else(failed, dead, head)
    if not isinstance(head, pa.Array):
        head = pa.repeat(head, len(batch))
    ops: list[bytes] = pc.binary_join_element_wise(head, fields, b"]", b"").to_pylist()
    return ops


def _key_heads(encoder: RowEncoder, batch: pa.RecordBatch, texts: list[pa.Array]) -> Any:
    """``["h","<key>"`` per row, the key rendered from the template, or None when a key
    column is null."""
    assert encoder.settings.key is not None
    parts: list[Any] = [b'["h","']
    for literal, name, _, _ in string.Formatter().parse(encoder.settings.key):
        if literal:
            parts.append(_escape(literal.encode("utf-8")))
        if name is not None:
            index = encoder.columns.index(name)
            text = texts[index]
            kind = batch.column(index).type
            if text.null_count or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
                return None  # the row encoder names a null key; binary keys: its text
            parts.append(text)
    parts.append(b'"')
    if not any(isinstance(p, pa.Array) for p in parts):  # pragma: no cover - a key names a column
        return None
    return pc.binary_join_element_wise(*parts, b"")


def _text(column: pa.Array, spark_type: Any) -> pa.Array:
    """The escaped field text of each value (null stays null), as binary."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return pc.cast(pc.cast(column, pa.string()), pa.binary())
    is_text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if is_text and not pc.any(pc.match_substring_regex(column, _NEEDS_ESCAPE)).as_py():
        return pc.cast(column, pa.binary())
    if pa.types.is_floating(kind) and pc.all(pc.is_finite(column)).as_py() is not False:
        # Every value finite: repr at C speed, as codec.float_text writes a finite value.
        texts = pa.array(map(repr, column.fill_null(0).to_pylist()), pa.string())
        return pc.if_else(column.is_valid(), pc.cast(texts, pa.binary()), None)
    encode = codec.field_encoder(spark_type)
    if _is_plain(kind):  # numbers, dates, times: their text holds nothing to escape
        return pa.array(
            [None if v is None else str(encode(v)).encode() for v in column.to_pylist()],
            pa.binary(),
        )
    out: list[bytes | None] = []
    for value in column.to_pylist():
        if value is None:
            out.append(None)
            continue
        text = encode(value)
        out.append(_escape(text.encode("utf-8") if isinstance(text, str) else text))
    return pa.array(out, pa.binary())


def _is_plain(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    )


def _escape(raw: bytes) -> bytes:
    return _ESCAPE.sub(_escape_byte, raw)


def _escape_byte(match: re.Match[bytes]) -> bytes:
    byte = match.group()
    if byte in (b'"', b"\\"):
        return b"\\" + byte
    return b"\\u%04x" % byte[0]


def _quoted(text: str) -> bytes:
    return encode_basestring(text).encode("utf-8")
