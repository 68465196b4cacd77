"""Bulk decoding of JSON values into a dimension's Arrow struct: exact, or not at all.

A store's answers are JSON, either as text (a Redis value) or as documents a JSON parser
already built (the objects of an HTTP batch answer). Decoding them one by one
(:meth:`~enrich.engine.records.record_schema.Schema.coerce`, then a tuple per row) costs
Python calls per value; the two decoders here build the struct's columns at C level instead:

* :func:`decode_texts`: JSON objects joined with newlines, read at once by Arrow's JSON
  reader against the struct (a fixed cost of ~0.1-0.4 ms per call: for many values);
* :func:`decode_documents`: ``dict`` documents, each field's values gathered by ``map``
  and converted by ``pyarrow.array`` once their Python types are known to convert as
  the per-value decoder converts them (no fixed cost to speak of).

Each gives every value exactly the outcome of the per-value decoder: anything it cannot
take exactly goes to the caller's :data:`PerValue` decoder, which gives the row, the
1:N rows or the ``DecodeError`` (with its text) that ``lookup_many`` gives. That is:
values that are not a JSON object (arrays for 1:N joins, ``null`` documents, garbage), a
struct with a type outside :data:`BULK_TYPES`, a row whose ``NOT NULL`` field is null,
and whatever the bulk step refuses (see each function). A value ``None`` is a miss.

Known exceptions, left because finding them would cost a scan of every request: Arrow's
reader skips a field the schema leaves out without judging it, so a value whose only
fault lies there (a number beyond a double's range, nesting deeper than the per-value
parser's 1,024 levels) is a row in bulk and a ``DecodeError`` per value.

Imports no pyspark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...engine.records.record_schema import Schema
from .columnar_answer import ColumnarAnswer

if TYPE_CHECKING:
    import pyarrow.json as pj

# pyarrow.compute and pyarrow.json are imported where they are used: this module comes
# in through enrich.spi with every connector, also in the processes that only plan a
# query (Spark's driver-side data source planners, one after another before a cold
# query's first row), which never decode (40-65 ms a process, 2026-11-28).

# Arrow types whose bulk decoding matches the per-value decoder exactly (checked by
# tests/connectors/redis/test_arrow.py and tests/connectors/http/test_arrow.py): any
# mismatch is a refusal that sends the value to the per-value decoder, never a different
# value.
BULK_TYPES = (pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.float32(), pa.bool_())

# The per-value decoder's answer for the values at these positions, aligned with them.
PerValue = Callable[[Sequence[int]], ColumnarAnswer]

_NONE = type(None)
# The Python types (as a JSON parser returns them) that pyarrow.array converts to each
# bulk type exactly as the per-value decoder does. Not there, because pyarrow converts
# them differently: a float into an integer type (pyarrow truncates 3.5 to 3; the
# decoder refuses it), a bool into a float type (pyarrow reads 1.0; the decoder refuses
# it), an int into a string (pyarrow refuses; the decoder spells it).
_EXACT_KINDS: dict[pa.DataType, frozenset[type]] = {
    pa.string(): frozenset({str, _NONE}),
    pa.int32(): frozenset({int, _NONE}),
    pa.int64(): frozenset({int, _NONE}),
    pa.float64(): frozenset({float, int, _NONE}),
    pa.float32(): frozenset({float, int, _NONE}),
    pa.bool_(): frozenset({bool, _NONE}),
}


def is_bulk(struct_type: pa.StructType) -> bool:
    """Whether every field of ``struct_type`` has a bulk type."""
    return all(f.type in BULK_TYPES for f in struct_type)


def decode_texts(
    values: Sequence[bytes | None],
    struct_type: pa.StructType,
    schema: Schema,
    per_value: PerValue,
) -> ColumnarAnswer:
    """The answer for JSON texts (None: a miss), aligned with them.

    Arrow reads the objects that stand on one line; the per-value decoder gets the
    rest, and all of them when Arrow might read differently: a ``NaN``/``Infinity``
    token (Arrow takes them, the per-value parser not), invalid UTF-8, a line holding
    two objects, any error. (The checks and joins are C-level bytes operations: on a
    request's few hundred values Arrow compute's per-call setup costs more, measured.)
    """
    count = len(values)
    if not is_bulk(struct_type):
        return _finish(count, None, (), range(count), struct_type, schema, per_value)
    try:  # join refuses None (a missing key) at C speed: the common case costs no scan
        blob = b"\n".join(values)  # type: ignore[arg-type]
        found: Sequence[int] = range(count)
        present: Sequence[bytes] = values  # type: ignore[assignment]
    except TypeError:
        found = [i for i, value in enumerate(values) if value is not None]
        present = [values[i] for i in found]  # type: ignore[misc]
        blob = b"\n".join(present)
    if not present:  # every key missing
        return ColumnarAnswer(pa.nulls(count, type=struct_type))
    size = len(present)
    # Every value starts an object and holds no newline: one line per value.
    if blob[:1] == b"{" and blob.count(b"\n") == size - 1 == blob.count(b"\n{"):
        rows = read_lines(blob, size, struct_type)
        if rows is not None:
            return _finish(count, rows, found, (), struct_type, schema, per_value)
    # The general case: objects on one line in bulk, the rest (arrays for 1:N, JSON
    # null, garbage, pretty-printed objects) one value at a time.
    objects = [i for i, v in zip(found, present, strict=True) if v[:1] == b"{" and b"\n" not in v]
    rows = read_lines(b"\n".join(values[i] or b"" for i in objects), len(objects), struct_type)
    if rows is None:
        return _finish(count, None, (), found, struct_type, schema, per_value)
    bulk = set(objects)
    others = [i for i in found if i not in bulk]
    return _finish(count, rows, objects, others, struct_type, schema, per_value)


def decode_documents(
    documents: Sequence[Any],
    struct_type: pa.StructType,
    schema: Schema,
    per_value: PerValue,
) -> ColumnarAnswer:
    """The answer for parsed JSON documents (None: a miss), aligned with them.

    ``dict`` documents are converted in bulk, field by field; a document with a field
    value of a Python type outside the exact ones for its Arrow type (a float in an
    integer field, text in a number field, a nested value...) goes to the per-value
    decoder, and every document does when ``pyarrow.array`` refuses a column (an
    integer out of range, one a double cannot hold exactly). So do documents that are
    not a ``dict`` (lists for 1:N joins, numbers, text).
    """
    count = len(documents)
    if not is_bulk(struct_type):
        return _finish(count, None, (), range(count), struct_type, schema, per_value)
    objects: Sequence[dict[str, Any]]
    positions: Sequence[int]
    others: list[int] = []
    kinds = set(map(type, documents))
    if kinds <= {dict}:
        objects, positions = documents, range(count)
    else:
        positions = [i for i, d in enumerate(documents) if type(d) is dict]
        if not kinds <= {dict, _NONE}:
            others = [i for i, d in enumerate(documents) if d is not None and type(d) is not dict]
        objects = [documents[i] for i in positions]
    fields = list(struct_type)
    columns = [list(map(dict.get, objects, repeat(f.name))) for f in fields]
    refused: set[int] = set()
    for column, f in zip(columns, fields, strict=True):
        exact = _EXACT_KINDS[f.type]
        if not set(map(type, column)) <= exact:
            refused.update(j for j, value in enumerate(column) if type(value) not in exact)
    if refused:
        keep = [j for j in range(len(positions)) if j not in refused]
        others = sorted([*others, *(positions[j] for j in refused)])
        positions = [positions[j] for j in keep]
        columns = [[column[j] for j in keep] for column in columns]
    try:
        arrays = [pa.array(c, type=f.type) for c, f in zip(columns, fields, strict=True)]
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        # A column pyarrow refuses (an int out of the field's range, one a double cannot
        # hold exactly, text it cannot encode): the per-value decoder says which and why.
        return _finish(
            count, None, (), sorted([*others, *positions]), struct_type, schema, per_value
        )
    rows = pa.StructArray.from_arrays(arrays, fields=fields)
    return _finish(count, rows, positions, others, struct_type, schema, per_value)


def read_lines(blob: bytes, lines: int, struct_type: pa.StructType) -> pa.StructArray | None:
    """``lines`` JSON objects, one per line of ``blob``, decoded by Arrow; None when
    that might not be exactly the per-value decoder's result."""
    import pyarrow.compute as pc
    import pyarrow.json as pj

    if lines == 0:
        empty: pa.StructArray = pa.array([], type=struct_type)
        return empty
    # Arrow takes NaN and Infinity tokens, the per-value path not. One byte is found
    # at memchr speed, a word is searched for only where its first letter occurs.
    if (b"N" in blob and b"NaN" in blob) or (b"I" in blob and b"Infinity" in blob):
        return None
    # The reader checks UTF-8 only in the fields it keeps (see below); the per-value
    # parser refuses a value with invalid UTF-8 anywhere, in a field left out too.
    if not blob.isascii():
        try:
            blob.decode()
        except UnicodeDecodeError:
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
    arrays = [  # float32 fields were read as doubles (see _parse_options)
        pc.cast(a, f.type, safe=False) if a.type != f.type else a
        for a, f in zip(arrays, struct_type, strict=True)
    ]
    rows = pa.StructArray.from_arrays(arrays, fields=list(struct_type))
    try:
        rows.validate(full=True)  # the reader does not check UTF-8; the per-value path does
    except pa.ArrowInvalid:
        return None
    return rows


_OPTIONS: dict[pa.StructType, pj.ParseOptions] = {}


def _parse_options(struct_type: pa.StructType) -> pj.ParseOptions:
    """The reader's options for ``struct_type``. A float32 field is read as a double and
    cast (rounding twice, as the per-value decoder's double does on its way into Arrow):
    read straight into float32, a number halfway between two float32s as a double would
    round differently."""
    import pyarrow.json as pj

    options = _OPTIONS.get(struct_type)
    if options is None:
        read = [f.with_type(pa.float64()) if f.type == pa.float32() else f for f in struct_type]
        options = _OPTIONS[struct_type] = pj.ParseOptions(
            explicit_schema=pa.schema(read), unexpected_field_behavior="ignore"
        )
    return options


def _finish(
    count: int,
    rows: pa.StructArray | None,
    positions: Sequence[int],
    others: Sequence[int],
    struct_type: pa.StructType,
    schema: Schema,
    per_value: PerValue,
) -> ColumnarAnswer:
    """Bulk ``rows`` at ``positions``, the per-value answers at ``others``, nulls (misses)
    elsewhere, as one answer of ``count`` keys. A bulk row with a null ``NOT NULL`` field
    goes to the per-value decoder too (which refuses it, naming the field), and so does
    one with an infinite or negative-zero float (see :func:`_unsure_floats`)."""
    if rows is not None:
        refused = sorted({*_null_in_not_null(rows, schema), *_unsure_floats(rows)})
        if refused:
            gone = set(refused)
            keep = [j for j in range(len(positions)) if j not in gone]
            others = sorted([*others, *(positions[j] for j in refused)])
            positions = [positions[j] for j in keep]
            rows = rows.take(pa.array(keep, pa.int64()))
    if not others:
        if rows is None:
            return ColumnarAnswer(pa.nulls(count, type=struct_type))
        return ColumnarAnswer(_spread(rows, positions, count))
    rest = per_value(others)
    index: list[int | None] = [None] * count
    for j, i in enumerate(positions):
        index[i] = j
    base = len(positions)
    for k, i in enumerate(others):
        index[i] = base + k
    pieces = [rest.rows] if rows is None else [rows, rest.rows]
    merged = pa.concat_arrays(pieces).take(pa.array(index, pa.int64()))
    errors = {others[k]: error for k, error in rest.errors.items()}
    multi = {others[k]: found for k, found in rest.multi.items()}
    return ColumnarAnswer(merged, errors, multi)


def _null_in_not_null(rows: pa.StructArray, schema: Schema) -> list[int]:
    """The rows whose value of a ``NOT NULL`` field is null (a bulk decoder reads a
    missing field as null; the per-value decoder refuses it)."""
    import pyarrow.compute as pc

    names = [f.name for f in schema.fields if not f.nullable]
    if not names or len(rows) == 0:
        return []
    nulls = rows.field(names[0]).is_null()
    for name in names[1:]:
        nulls = pc.or_(nulls, rows.field(name).is_null())
    if not pc.any(nulls).as_py():
        return []
    found: list[int] = pc.indices_nonzero(nulls).to_pylist()
    return found


def _unsure_floats(rows: pa.StructArray) -> list[int]:
    """The rows with an infinite or negative-zero float, which the per-value decoder may
    read otherwise: Arrow's JSON reader reads a number beyond a double's range as
    infinity (the per-value parser refuses it) and ``-0`` as -0.0 (the per-value parser
    reads the integer 0, so 0.0); ``-0.0`` and numbers in range read the same."""
    import pyarrow.compute as pc

    found: pa.Array | None = None
    for i, f in enumerate(rows.type):
        if f.type not in _SIGN_BITS:
            continue
        column = rows.field(i)
        bits, minus_zero = _SIGN_BITS[f.type]
        unsure = pc.or_(pc.is_inf(column), pc.equal(column.view(bits), pa.scalar(minus_zero, bits)))
        # or_kleene: a null (no value in this field) must not hide another field's true
        found = unsure if found is None else pc.or_kleene(found, unsure)
    if found is None or not pc.any(found).as_py():
        return []
    unsure_rows: list[int] = pc.indices_nonzero(found).to_pylist()
    return unsure_rows


# A float type -> the integer type of its width and the bits of -0.0 read as that integer.
# Plain ints, made Arrow scalars at the call: pyarrow's first ``pa.scalar`` imports pandas
# (0.25-0.45 s), which the processes that import this module only to plan (Spark's
# driver-side data source planners, through ``enrich.spi``) never need.
_SIGN_BITS = {
    pa.float64(): (pa.int64(), -(2**63)),
    pa.float32(): (pa.int32(), -(2**31)),
}


def _spread(rows: pa.StructArray, positions: Sequence[int], count: int) -> pa.StructArray:
    """``rows[j]`` moved to ``positions[j]`` of ``count`` structs, the others null."""
    if len(positions) == count:
        return rows
    index: list[int | None] = [None] * count
    for j, i in enumerate(positions):
        index[i] = j
    spread: pa.StructArray = rows.take(pa.array(index, pa.int64()))
    return spread
