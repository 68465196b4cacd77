"""A table's columns as a dimension schema: database types mapped to Spark SQL types.

When a lookup is given no ``schema=``, its connector reads the table's columns from
``information_schema.columns`` (in column order, the key columns left out) and maps each
type with :func:`schema_from_columns`. The names are ``information_schema``'s
``data_type`` spellings of PostgreSQL and MySQL/MariaDB, lower-cased; a dialect may add
its own (``extra=``). What maps (as Spark's JDBC source maps them):

* text of any kind (``text``, ``varchar``, ``char``, ``uuid``, ``json``, ``jsonb``,
  ``inet``, enums, ``time``, ``interval``...): ``string`` (read as the database prints it);
* ``smallint``/``int2`` -> ``smallint``; ``integer``/``int``/``mediumint`` -> ``int``;
  ``bigint`` -> ``bigint``; ``tinyint`` -> ``tinyint``;
* ``real``/``float4``/``float`` -> ``float``; ``double precision``/``double`` -> ``double``;
* ``numeric(p,s)``/``decimal(p,s)`` -> ``decimal(p,s)`` (p <= 38); a numeric without a
  precision -> ``decimal(38,18)`` (Spark's JDBC choice);
* ``boolean`` -> ``boolean``; ``bytea``/``blob``/``varbinary``... -> ``binary``;
* ``date`` -> ``date``; ``timestamp with time zone`` -> ``timestamp``;
  ``timestamp without time zone``/``datetime`` -> ``timestamp_ntz`` (a wall-clock time);
* a PostgreSQL array (``ARRAY`` with element ``_int4``...) -> ``array<element>``.

Anything else (``tsvector``, ``point``, a numeric wider than 38 digits...) raises
:class:`UnmappableColumn`, naming the table, the column and its type, and saying to give
``schema=``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from enrich import SchemaError
from enrich.spi import Schema

__all__ = ("Column", "UnmappableColumn", "schema_from_columns", "TYPE_NAMES")


class UnmappableColumn(SchemaError):
    """A column's database type has no dimension type (give ``schema=`` to choose one).

    Attributes:
        column: the column's name.
        type: its database type, as ``information_schema`` spells it.
    """

    def __init__(self, message: str, *, column: str, type: str) -> None:
        super().__init__(message)
        self.column = column
        self.type = type


_STRING = "string"
TYPE_NAMES: dict[str, str] = {
    # text and anything printed as text
    **dict.fromkeys(
        [
            "text", "character varying", "varchar", "character", "char", "bpchar", "name",
            "citext", "uuid", "json", "jsonb", "xml", "inet", "cidr", "macaddr", "interval",
            "time", "time without time zone", "time with time zone", "tinytext",
            "mediumtext", "longtext", "enum", "set", "user-defined", "money",
        ],
        _STRING,
    ),
    "smallint": "smallint", "int2": "smallint",
    "integer": "int", "int": "int", "int4": "int", "mediumint": "int",
    "bigint": "bigint", "int8": "bigint",
    "tinyint": "tinyint",
    "real": "float", "float4": "float", "float": "float",
    "double precision": "double", "float8": "double", "double": "double",
    "boolean": "boolean", "bool": "boolean",
    **dict.fromkeys(
        ["bytea", "blob", "tinyblob", "mediumblob", "longblob", "binary", "varbinary"],
        "binary",
    ),
    "date": "date",
    "timestamp with time zone": "timestamp", "timestamptz": "timestamp",
    "timestamp without time zone": "timestamp_ntz", "timestamp": "timestamp_ntz",
    "datetime": "timestamp_ntz",
}  # fmt: skip
_DECIMALS = ("numeric", "decimal")
_UNBOUNDED_DECIMAL = "decimal(38,18)"


@dataclass(frozen=True)
class Column:
    """One row of ``information_schema.columns`` (``target.columns_statement``).

    Attributes:
        name: the column's name.
        data_type: ``data_type`` as the database spells it (``character varying``).
        precision, scale: ``numeric_precision``/``numeric_scale`` (None unless numeric).
        detail: PostgreSQL's ``udt_name`` (``_int4`` for ``int[]``), MySQL's ``column_type``.
    """

    name: str
    data_type: str
    precision: int | None = None
    scale: int | None = None
    detail: str | None = None


def column_type(column: Column, table: str, extra: Mapping[str, str] | None = None) -> str:
    """The dimension type (DDL) of ``column``.

    Raises:
        UnmappableColumn: no dimension type holds it.
    """
    names = {**TYPE_NAMES, **(extra or {})}
    kind = column.data_type.lower()
    if kind in _DECIMALS:
        if column.precision is None:
            return _UNBOUNDED_DECIMAL
        if column.precision <= 38:
            return f"decimal({column.precision},{column.scale or 0})"
    elif kind == "array" and column.detail and column.detail.startswith("_"):
        element = names.get(column.detail[1:].lower())
        if element is not None:
            return f"array<{element}>"
    elif kind in names:
        return names[kind]
    shown = column.data_type if kind != "array" else f"array of {column.detail}"
    if kind in _DECIMALS:
        shown = f"{column.data_type}({column.precision},{column.scale})"
    raise UnmappableColumn(
        f"column {column.name!r} of {table} has type {shown!r}, which no dimension type "
        "holds: give schema= naming the columns to read (and cast them in a query= if needed)",
        column=column.name,
        type=shown,
    )


def schema_from_columns(
    columns: Iterable[Column],
    *,
    table: str,
    keys: Sequence[str],
    extra: Mapping[str, str] | None = None,
) -> Schema:
    """The schema of a table's columns, the key columns left out.

    Raises:
        ValueError: the table has no columns (it does not exist) or lacks a key column.
        UnmappableColumn: a column's type maps to no dimension type.
    """
    found = list(columns)
    if not found:
        raise ValueError(f"table {table} does not exist (or has no columns visible to this user)")
    names = {c.name for c in found}
    missing = [k for k in keys if k not in names]
    if missing:
        raise ValueError(
            f"table {table} has no column {missing[0]!r} (key); it has {sorted(names)}"
        )
    pairs = [(c.name, column_type(c, table, extra)) for c in found if c.name not in keys]
    if not pairs:
        raise ValueError(f"table {table} has only its key column(s) {list(keys)}: nothing to add")
    return Schema.of(pairs)
