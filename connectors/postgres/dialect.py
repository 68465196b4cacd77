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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("PgDialect", "key_kind")

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
