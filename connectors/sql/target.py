"""What a relational lookup reads: a table and its key column(s), or a query of the user's.

Either form fixes the **row layout** every statement of the connector returns: the key
column(s) first, in the order of ``key``, then the schema's fields in schema order, each
named as its field. :func:`batch_statement` and :func:`full_statement` build the SQL from
a :class:`Target`, a schema and a :class:`Dialect` (how a database quotes names, casts a
column to what a field reads, and filters by a batch of keys):

* table form: ``SELECT "id", "name"::text AS "name", ... FROM "users" WHERE <filter>``,
  the filter given by the dialect (PostgreSQL ``"id" = ANY($1)``; MySQL a bounded
  ``IN (...)``); the full load is the same select without a filter, ``ORDER BY`` the key
  so that one key's rows (1:N) come together;
* query form: the user's ``SELECT`` with one ``:keys`` parameter where the batch of keys
  goes (PostgreSQL ``WHERE u.id = ANY(:keys)``; MySQL ``WHERE u.id IN (:keys)``),
  returning columns named as the key and the schema's fields; it is wrapped as
  ``SELECT "id", "name", ... FROM (<query>) AS q`` to fix the layout. A full cache of
  the query form needs ``full_query`` (no parameter), wrapped the same way.

Names are validated here (a table ``schema.table``, columns, no quotes or NUL), then
quoted by the dialect: a name is never spliced into SQL unquoted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from enrich.spi import Schema, short

__all__ = (
    "KEYS_PARAMETER",
    "Dialect",
    "Target",
    "batch_statement",
    "columns_statement",
    "full_statement",
)

# The one parameter of a user's query: where the batch of keys goes.
KEYS_PARAMETER = ":keys"
# ":keys" as a parameter, not inside a "::keys" cast or a longer name.
_KEYS = re.compile(r"(?<![:\w]):keys\b")
_BAD_NAME = re.compile(r"[\"`\x00]")


class Dialect(Protocol):
    """How one database spells what the statements need."""

    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier (``"a b"`` / ```a b```)."""
        ...

    def field_expression(self, column: str, field_type: Any) -> str:
        """The select expression reading quoted ``column`` as ``field_type`` (a DataType):
        a cast where the driver's value would not read as the field (a uuid as text)."""
        ...

    def key_filter(self, key_columns: Sequence[str], keys_sql: str | None) -> str:
        """The ``WHERE`` condition matching a batch of keys on quoted ``key_columns``
        (``keys_sql`` None: the table form; else the text standing for ``:keys``)."""
        ...

    def keys_parameter(self) -> str:
        """The text that replaces ``:keys`` in a user's query (``$1``, or a marker the
        dialect expands to a bounded ``IN`` list per batch)."""
        ...


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or _BAD_NAME.search(value):
        raise ValueError(f"{what} must be a name without quotes or NUL, got {short(value)}")
    return value


@dataclass(frozen=True)
class Target:
    """The table (or query) and key columns of a lookup; validated on construction.

    Attributes:
        table: ``("schema", "table")`` or ``("table",)``; empty in the query form.
        keys: the key column names, in the order of the join's ``on`` columns.
        query: the user's query with one ``:keys`` parameter, or None (table form).
        full_query: the query a full cache loads (query form), or None.
    """

    table: tuple[str, ...]
    keys: tuple[str, ...]
    query: str | None = None
    full_query: str | None = None

    @classmethod
    def of(
        cls,
        *,
        table: str | None,
        key: str | Sequence[str],
        query: str | None = None,
        full_query: str | None = None,
    ) -> Target:
        """Check the arguments of a lookup's constructor.

        Raises:
            ValueError: neither or both of ``table`` and ``query``; a bad name; a query
                without exactly one ``:keys``; a composite key with a query.
        """
        if isinstance(key, str):
            keys: tuple[str, ...] = (_name(key, "key"),)
        elif isinstance(key, Sequence) and key:
            keys = tuple(_name(k, "key") for k in key)
        else:
            raise ValueError(f"key must be a column name or a list of them, got {short(key)}")
        if len(set(k.lower() for k in keys)) != len(keys):
            raise ValueError(f"key names a column twice: {list(keys)}")
        if (table is None) == (query is None):
            raise ValueError("give either table= (and key=) or query= (with one :keys parameter)")
        if table is not None:
            if not isinstance(table, str):
                raise ValueError(f"table must be a name ('users' or 'app.users'), got {table!r}")
            parts = tuple(_name(part, "table") for part in table.split("."))
            if len(parts) > 2:
                raise ValueError(f"table must be 'table' or 'schema.table', got {table!r}")
            if full_query is not None:
                raise ValueError("full_query is for the query= form; a table is loaded whole")
            return cls(table=parts, keys=keys)
        if not isinstance(query, str) or len(_KEYS.findall(query)) != 1:
            raise ValueError(
                f"query must hold exactly one {KEYS_PARAMETER} parameter, got {short(query)}"
            )
        if len(keys) != 1:
            raise ValueError(
                f"query= takes one key column; a composite key needs table=, got {list(keys)}"
            )
        if full_query is not None and (not isinstance(full_query, str) or _KEYS.search(full_query)):
            raise ValueError(
                f"full_query must be a query without parameters, got {short(full_query)}"
            )
        return cls(table=(), keys=keys, query=query, full_query=full_query)

    @property
    def table_name(self) -> str:
        """The table as written (``app.users``), or ``"query"`` in the query form."""
        return ".".join(self.table) if self.table else "query"

    def described(self) -> str:
        """The target as a ``repr`` shows it: ``table='users', key='id'``."""
        key: Any = self.keys[0] if len(self.keys) == 1 else list(self.keys)
        if self.table:
            return f"table={self.table_name!r}, key={key!r}"
        shown = f"query={short(self.query)}, key={key!r}"
        return shown + (f", full_query={short(self.full_query)}" if self.full_query else "")


def _select(target: Target, schema: Schema, dialect: Dialect, *, wrapped: bool) -> str:
    """The select list of the row layout (module docstring)."""
    keys = [dialect.quote(k) for k in target.keys]
    fields = []
    for f in schema.fields:
        column = dialect.quote(f.name)
        expression = column if wrapped else dialect.field_expression(column, f.type)
        fields.append(expression if expression == column else f"{expression} AS {column}")
    return ", ".join(keys + fields)


def _from(target: Target, dialect: Dialect) -> str:
    return ".".join(dialect.quote(part) for part in target.table)


def batch_statement(target: Target, schema: Schema, dialect: Dialect) -> str:
    """The statement that answers one batch of keys (module docstring)."""
    if target.query is None:
        condition = dialect.key_filter([dialect.quote(k) for k in target.keys], None)
        select = _select(target, schema, dialect, wrapped=False)
        return f"SELECT {select} FROM {_from(target, dialect)} WHERE {condition}"
    query = _KEYS.sub(lambda _: dialect.keys_parameter(), target.query)
    return f"SELECT {_select(target, schema, dialect, wrapped=True)} FROM ({query}) AS q"


def full_statement(
    target: Target, schema: Schema, dialect: Dialect, *, ordered: bool = True
) -> str:
    """The statement that reads the whole dimension, ordered by key (``ordered=False``:
    unordered, for a key a unique index holds, whose rows need no grouping).

    Raises:
        ValueError: the query form without ``full_query``.
    """
    order = " ORDER BY " + ", ".join(dialect.quote(k) for k in target.keys) if ordered else ""
    if target.query is None:
        select = _select(target, schema, dialect, wrapped=False)
        return f"SELECT {select} FROM {_from(target, dialect)}{order}"
    if target.full_query is None:
        raise ValueError("a full cache of a query= lookup needs full_query= (the whole dimension)")
    select = _select(target, schema, dialect, wrapped=True)
    return f"SELECT {select} FROM ({target.full_query}) AS q{order}"


def columns_statement(placeholder_table: str, placeholder_schema: str, detail: str) -> str:
    """The ``information_schema`` query of a table's columns (name, type, precision,
    scale, ``detail``: PostgreSQL's ``udt_name``, MySQL's ``column_type``), in column
    order; the parameters are the table and its schema, in the dialect's placeholders."""
    return (
        f"SELECT column_name, data_type, numeric_precision, numeric_scale, {detail} "
        "FROM information_schema.columns "
        f"WHERE table_name = {placeholder_table} AND table_schema = {placeholder_schema} "
        "ORDER BY ordinal_position"
    )
