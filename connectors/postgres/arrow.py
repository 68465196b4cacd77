"""The columnar lookup of ``PostgresLookup``: a batch's rows come back as columns.

The batch statement is wrapped in one aggregate row::

    SELECT array_agg(q."id"), array_agg(q."name"), ... FROM (<batch statement>) AS q

so that asyncpg decodes each column as one array (in C, into a list) rather than one
``Record`` per row, and no Python runs per row: each field's list becomes an Arrow array
with ``pa.array(values, type)``, and the asked keys find their rows with
``pyarrow.compute.index_in`` and one ``take``.

Every key gets exactly what ``lookup_many`` gives it. Where the bulk path cannot promise
that, a batch's columns are decoded row by row by the same :class:`~connectors.sql.RowReader`
instead (with its ``DecodeError`` per key): a key with several rows (1:N), a composite
key, or a column Arrow will not take as the field's type as it is (a ``numeric`` in a
``double`` field, a value out of an ``int`` field's range, a ``map`` or ``struct`` read
from JSON text).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.sql import RowReader
from enrich.spi import ColumnarAnswer, LookupFailed, answer_from_mapping

# Field type -> the column types (array_agg's element type names) whose asyncpg values
# Arrow takes as the schema's coercion would read them: pa.array refuses (and the batch
# falls back) where the value does not fit (an int out of range, a decimal to round).
# Arrays are left out: array_agg of arrays needs them all of one shape, never null.
_INTS = frozenset({"int2", "int4", "int8"})
_BULK: dict[str, frozenset[str]] = {
    "tinyint": _INTS,
    "smallint": _INTS,
    "int": _INTS,
    "bigint": _INTS,
    "float": frozenset({"float4", "float8"}),
    "double": frozenset({"float4", "float8"}),
    "string": frozenset({"text"}),  # the select list casts a string field to text
    "boolean": frozenset({"bool"}),
    "binary": frozenset({"bytea"}),
    "date": frozenset({"date"}),
    "timestamp": frozenset({"timestamptz", "timestamp"}),
    "timestamp_ntz": frozenset({"timestamp"}),
}


# Field type -> the column types whose asyncpg values the schema takes unconverted (the
# values a coercion would return unchanged): a full load then skips the per-row coercion.
_IDENTITY: dict[str, frozenset[str]] = {
    "bigint": _INTS,
    "int": frozenset({"int2", "int4"}),
    "smallint": frozenset({"int2"}),
    "double": frozenset({"float8"}),  # not float4: COPY prints it shorter than it is
    "string": frozenset({"text"}),
    "boolean": frozenset({"bool"}),
    "binary": frozenset({"bytea"}),
    "date": frozenset({"date"}),
    "timestamp": frozenset({"timestamptz"}),
    "timestamp_ntz": frozenset({"timestamp"}),
}


def is_identity(schema: Any, column_types: Sequence[str]) -> bool:
    """Whether every field's column (``column_types``, the batch statement's) holds
    values its type takes unconverted, and no field is declared NOT NULL."""
    return all(
        field.nullable and name in _IDENTITY.get(str(field.type), frozenset())
        for field, name in zip(schema.fields, column_types, strict=True)
    )


def aggregate_statement(batch_sql: str, names: Sequence[str], quote: Any) -> str:
    """``batch_sql`` wrapped into one row of arrays, one per column of the row layout."""
    columns = ", ".join(f"array_agg(q.{quote(name)})" for name in names)
    return f"SELECT {columns} FROM ({batch_sql}) AS q"


def is_bulk(schema: Any, key_width: int, column_types: Sequence[str]) -> bool:
    """Whether the bulk path may serve: one key column, and each field's column of a type
    Arrow takes as it is (``column_types``: the aggregate's arrays' type names, ``_int4``,
    the fields' only)."""
    if key_width != 1:
        return False
    for field, array_type in zip(schema.fields, column_types, strict=True):
        element = array_type.removesuffix("[]").removeprefix("_")
        ddl = str(field.type)
        allowed = frozenset({"numeric"}) if ddl.startswith("decimal(") else _BULK.get(ddl)
        if allowed is None or element not in allowed:
            return False
    return True


def decode(
    keys: pa.Array,
    wanted: list[Any],
    columns: list[list[Any] | None],
    reader: RowReader,
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """The answer for ``keys`` from one batch's columns (the key column first; None
    columns: no row matched). Falls back to the per-row decoder (module docstring)."""
    if columns[0] is None:  # no row at all: every key a miss
        return ColumnarAnswer(pa.nulls(len(keys), struct_type))
    ids = columns[0]
    try:
        if len(set(ids)) != len(ids):
            raise _Fallback  # a key with several rows (1:N)
        arrays = [
            pa.array(values, type=field.type)
            for values, field in zip(columns[1:], struct_type, strict=True)
        ]
        found = pa.array(ids)
        index = pc.index_in(keys, value_set=found.cast(keys.type))
        structs = pa.StructArray.from_arrays(arrays, fields=list(struct_type))
        return ColumnarAnswer(structs.take(index))
    except (_Fallback, pa.ArrowException, TypeError, ValueError, OverflowError):
        rows = list(zip(*columns, strict=True))
        return answer_from_mapping(wanted, reader.answers(wanted, rows), struct_type)


def merge(outcomes: Sequence[list[list[Any] | None]]) -> list[list[Any] | None]:
    """The columns of several statements' answers, end to end (None: no rows at all)."""
    if len(outcomes) == 1:
        return outcomes[0]
    merged: list[list[Any] | None] = []
    for columns in zip(*outcomes, strict=True):
        present = [column for column in columns if column is not None]
        merged.append(list(itertools.chain.from_iterable(present)) if present else None)
    return merged


def failed(keys: Sequence[Any], error: LookupFailed, struct_type: pa.StructType) -> ColumnarAnswer:
    """Every key of a batch failed with ``error``."""
    answer = ColumnarAnswer(pa.nulls(len(keys), struct_type))
    answer.errors.update(dict.fromkeys(range(len(keys)), error))
    return answer


def assemble(
    count: int,
    parts: list[tuple[list[int], ColumnarAnswer]],
    refused: dict[int, BaseException],
    struct_type: pa.StructType,
) -> ColumnarAnswer:
    """One answer for ``count`` keys from the answers of batches of their positions,
    the ``refused`` keys failing with their own errors."""
    if len(parts) == 1 and not refused and len(parts[0][0]) == count:
        return parts[0][1]
    order: list[int] = []
    arrays: list[pa.Array] = []
    answer = ColumnarAnswer(pa.nulls(0, struct_type))
    for positions, part in parts:
        order += positions
        arrays.append(part.rows)
        answer.errors.update((positions[i], e) for i, e in part.errors.items())
        answer.multi.update((positions[i], m) for i, m in part.multi.items())
    order += list(refused)
    arrays.append(pa.nulls(len(refused), struct_type))
    answer.errors.update(refused)
    inverse = np.empty(count, dtype=np.int64)
    inverse[np.asarray(order, dtype=np.int64)] = np.arange(count, dtype=np.int64)
    answer.rows = pa.concat_arrays(arrays).take(pa.array(inverse))
    return answer


class _Fallback(Exception):
    """The batch needs the per-row decoder."""
