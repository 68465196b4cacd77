"""How PostgreSQL spells the relational base's statements (:class:`connectors.sql.Dialect`).

* names are double-quoted, a quote inside doubled;
* a ``string`` field is read as ``column::text`` (a uuid, an enum, json, an interval or
  an inet comes back as the text PostgreSQL prints), a ``map`` or ``struct`` field as
  ``to_jsonb(column)::text`` (a composite type or jsonb as JSON text, which the schema
  reads); every other field as the column is (asyncpg's values: int, float, Decimal,
  bool, bytes, date, datetime, lists for arrays);
* one key column: ``"id" = ANY($1)``, the batch's keys as one array parameter;
* a composite key: ``("tenant", "id") IN (SELECT * FROM unnest($1::text[], $2::int8[]))``,
  one array per key column, cast to the columns' types (read from the table once per
  process: :func:`key_plan`), so the planner joins the pairs against the table's index;
* a user's query: ``:keys`` becomes ``$1`` (an array: write ``= ANY(:keys)``).

And which column types give values as the schema reads them (decided once per process
from the prepared statements' column types): :func:`is_bulk` (Arrow takes them as they
are: the columnar lookup's ``array_agg`` row, :mod:`connectors.postgres.arrow`) and
:func:`is_identity` (the schema's coercion would return them unchanged: the full load's
fast paths, :mod:`connectors.postgres.scan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = (
    "CSV_FIELDS",
    "PgDialect",
    "aggregate_statement",
    "csv_statement",
    "is_bulk",
    "is_identity",
    "key_kind",
)

_INT = frozenset({"int2", "int4", "int8"})
_TEXT = frozenset({"text", "varchar", "bpchar", "name", "citext"})


def quote(name: str) -> str:
    """``name`` as a PostgreSQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def key_kind(type_name: str) -> str:
    """What a key part must be for a column of this type (``connectors.sql.fit_key``)."""
    if type_name in _INT:
        return "int"
    if type_name in _TEXT:
        return "text"
    if type_name == "bytea":
        return "bytes"
    return "any"


@dataclass(frozen=True)
class PgDialect:
    """PostgreSQL's spelling; ``key_types`` are the key columns' qualified type names
    (``"pg_catalog"."int8"``), needed for a composite key's ``unnest`` casts."""

    key_types: tuple[str, ...] = ()

    def quote(self, name: str) -> str:
        return quote(name)

    def field_expression(self, column: str, field_type: Any) -> str:
        ddl = str(field_type)
        if ddl == "string":
            return f"{column}::text"
        if ddl.startswith(("map<", "struct<")):
            return f"to_jsonb({column})::text"
        return column

    def key_filter(self, key_columns: Sequence[str], keys_sql: str | None) -> str:
        if len(key_columns) == 1:
            return f"{key_columns[0]} = ANY($1)"
        if len(self.key_types) != len(key_columns):
            raise ValueError("a composite key's filter needs the key columns' types")
        arrays = ", ".join(f"${n}::{t}[]" for n, t in enumerate(self.key_types, start=1))
        return f"({', '.join(key_columns)}) IN (SELECT * FROM unnest({arrays}))"

    def keys_parameter(self) -> str:
        return "$1"


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


# Field types a batch may come back as CSV text (read by Arrow's CSV reader), when their
# columns give values the schema takes unconverted (is_identity) and the key is unique.
CSV_FIELDS = frozenset({"string", "bigint", "int", "smallint", "double", "boolean", "date"})


def _csv_cell(column: str, text: bool) -> str:
    # Text quoted as CSV quotes it (a NULL stays an empty unquoted cell); the rest as
    # PostgreSQL prints it (the session has DateStyle ISO and exact floats).
    if text:
        return f"""coalesce('"' || replace({column}::text, '"', '""') || '"', '')"""
    return f"coalesce({column}::text, '')"


def csv_statement(batch_sql: str, keys: Sequence[tuple[str, bool]], schema: Any) -> str:
    """``batch_sql`` wrapped into one text value: its rows as CSV lines, the key
    column(s) first (``keys``: name, whether text), then the schema's fields."""
    cells = [_csv_cell(f"q.{quote(name)}", text) for name, text in keys]
    cells += [_csv_cell(f"q.{quote(f.name)}", str(f.type) == "string") for f in schema.fields]
    return f"SELECT string_agg(concat_ws(',', {', '.join(cells)}), E'\\n') FROM ({batch_sql}) AS q"
