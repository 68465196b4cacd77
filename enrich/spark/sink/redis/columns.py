"""Arrow batches to staged operations a column at a time (stream entries and hashes).

The transactional writer stages each row as a packed operation
(:func:`enrich.spark.sink.redis.codec.pack`: ``x, stream, field, value, ...`` or ``h, key,
field, value, ...``, each item a MessagePack string). :func:`staged_operations` builds
them for a whole Arrow batch with Arrow compute: each column becomes its ``name text``
pieces, each with its string header (empty where null), and the pieces are joined
row-wise at C level. The format is binary-safe, so a value's text goes in as it is
(nothing escaped); the text is the idempotent writer's
(:func:`enrich.spark.sink.redis.frames.field_texts`: integer, boolean and string columns by
Arrow's cast, finite doubles as ``repr`` writes them, every other type value by value
through the codec). What it stages is byte for byte what the row encoder stages
(``tests/spark/sink/test_sink_columns.py``). JSON documents (``value=json``) and key
templates with a format spec or conversion go row by row.
"""

from __future__ import annotations

import string
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import codec, frames
from .row_writes import RowEncoder


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
    names = encoder.columns
    pieces = []
    for index, name in enumerate(names):
        text = frames.field_texts(batch.column(index), encoder.field_type(index))
        pieces.append(pc.fill_null(_join(_packed(name), _strings(text)), b""))
    fields = pieces[0] if len(pieces) == 1 else _join(*pieces)
    # An entry needs a field: an all-null row keeps its first column, empty.
    empty = pa.scalar(_packed(names[0]) + _packed(""), pa.binary())
    fields = pc.if_else(pc.equal(pc.binary_length(fields), 0), empty, fields)
    if settings.stream is not None:
        head: Any = pa.scalar(_packed("x") + _packed(settings.stream), pa.binary())
    else:
        keys = frames.key_texts(encoder, batch)
        if keys is None or keys.null_count:
            return None  # the row encoder names a null key; binary keys: its text
        head = _join(_packed("h"), _strings(keys))
    if encoder.error_index is not None:
        assert settings.dead_letter is not None
        dead = pa.scalar(_packed("x") + _packed(settings.dead_letter), pa.binary())
        failed = pc.is_valid(batch.column(encoder.error_index))
        head = pc.if_else(failed, dead, head)
    if not isinstance(head, pa.Array):
        head = pa.repeat(head, len(batch))
    ops: list[bytes] = _join(head, fields).to_pylist()
    return ops


def _strings(texts: pa.Array) -> pa.Array:
    """Each text as a MessagePack str32 (null stays null): the header's 4-byte length
    is built in numpy, as a fixed-size binary column, and joined at C level."""
    sizes = pc.binary_length(texts).fill_null(0).to_numpy(zero_copy_only=False)
    raw = sizes.astype(">u4").tobytes()
    lengths = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(4), len(texts), [None, pa.py_buffer(raw)]
    )
    return _join(codec.STR32, lengths.cast(pa.binary()), texts)


def _packed(text: str) -> bytes:
    return codec.pack([text])


def _join(*parts: Any) -> pa.Array:
    """Row-wise concatenation of arrays and byte literals (null where any part is)."""
    return pc.binary_join_element_wise(*parts, b"")
