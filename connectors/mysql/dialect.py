"""How MySQL and MariaDB spell the relational base's statements (:class:`connectors.sql.Dialect`).

* names are backtick-quoted, a backtick inside doubled;
* a ``string`` field is read as ``CAST(column AS CHAR)`` (a number, a date or a JSON
  column comes back as the text the server prints); every other field as the column is
  (PyMySQL's values: int, float, Decimal, bytes, date, datetime; JSON text for arrays,
  maps and structs, which the schema reads);
* a batch of keys is a bounded ``IN`` list: ``` `id` IN (%s, %s, ...) ```, and for a
  composite key ``` (`tenant`, `id`) IN ((%s, %s), (%s, %s), ...) ```, one placeholder per
  key part. aiomysql has no server-side prepared statements: the driver escapes each key
  into the text (PyMySQL's escaping), and :func:`expand` builds, and a :class:`Plan`
  keeps, one statement text per batch size, so a full batch's text is built once;
* a user's query: ``:keys`` becomes the list's placeholders (write ``IN (:keys)``).

A ``%`` of the statement itself (a ``LIKE 'a%'`` in a user's query) is doubled, as
PyMySQL's ``%s`` formatting needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("KEYS_MARK", "MySqlDialect", "expand", "key_kind", "quote")

# Stands for the batch's placeholders until the batch size is known; names and queries
# cannot hold a NUL (connectors.sql.target refuses them), so it never collides.
KEYS_MARK = "\x00keys\x00"

_INT = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"})
_BYTES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def quote(name: str) -> str:
    """``name`` as a MySQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def key_kind(data_type: str) -> str:
    """What a key part must be for a column of this ``information_schema`` data type
    (``connectors.sql.fit_key``): MySQL would otherwise convert a text key compared with
    an integer column to a number ('abc' = 0) and match the wrong row."""
    kind = data_type.lower()
    if kind in _INT:
        return "int"
    if kind in _TEXT:
        return "text"
    if kind in _BYTES:
        return "bytes"
    return "any"


@dataclass(frozen=True)
class MySqlDialect:
    """MySQL/MariaDB's spelling (see the module docstring)."""

    def quote(self, name: str) -> str:
        return quote(name)

    def field_expression(self, column: str, field_type: Any) -> str:
        if str(field_type) == "string":
            return f"CAST({column} AS CHAR)"
        return column

    def key_filter(self, key_columns: Sequence[str], keys_sql: str | None) -> str:
        if len(key_columns) == 1:
            return f"{key_columns[0]} IN ({KEYS_MARK})"
        return f"({', '.join(key_columns)}) IN ({KEYS_MARK})"

    def keys_parameter(self) -> str:
        return KEYS_MARK


def template(statement: str) -> str:
    """A statement of the base as a PyMySQL format string (its own ``%`` doubled)."""
    return statement.replace("%", "%%")


def expand(statement_template: str, batch: int, width: int) -> str:
    """The statement for ``batch`` keys of ``width`` parts: the mark replaced by the
    placeholders (``%s, %s`` or ``(%s, %s), (%s, %s)``)."""
    one = "%s" if width == 1 else "(" + ", ".join(["%s"] * width) + ")"
    return statement_template.replace(KEYS_MARK, ", ".join([one] * batch))


def arguments(keys: Sequence[Any], width: int) -> list[Any]:
    """The flat parameter list of a batch (a composite key's parts in order)."""
    if width == 1:
        return list(keys)
    return [part for key in keys for part in key]
