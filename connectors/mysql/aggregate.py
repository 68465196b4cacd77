"""A batch's rows as one JSON document: one packet to read instead of one per row.

aiomysql reads a result row by row, each an awaited packet parsed in Python: for a
batch of 500 keys that is most of the client's CPU. Where the answer's values survive
JSON exactly, the batch statement is wrapped so that the server returns its rows as one
JSON array of arrays, parsed at once (orjson when installed)::

    SELECT JSON_ARRAYAGG(JSON_ARRAY(`id`, `name`, `tier`, `credit`)) FROM (<batch>) AS b

Each inner array is a row of the base's layout (key columns, then the schema's fields),
read by :class:`connectors.sql.RowReader` as any row is; a batch without rows gives
SQL NULL. Used only when every field is text (``CAST(... AS CHAR)`` already), an
integer, a float, a double (the server prints doubles with 17 significant digits: they
parse back exactly) or a boolean, and every key column is an integer or text; other
schemas (decimals, binary, dates, nested types) and servers without ``JSON_ARRAYAGG``
(MariaDB < 10.5, MySQL < 5.7.22) read rows. The session's ``group_concat_max_len``
(MariaDB's bound of ``JSON_ARRAYAGG``) is raised to 1 GiB by the pool's init command.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from enrich.spi import Schema

from .dialect import quote

__all__ = ("SCALARS", "is_eligible", "parse", "wrap")

SCALARS = frozenset(
    {"string", "tinyint", "smallint", "int", "bigint", "float", "double", "boolean"}
)
# The server errors that say this server has no JSON_ARRAYAGG (1305: no such function;
# 1064: a syntax it does not know).
UNSUPPORTED = frozenset({1064, 1305})


def is_eligible(schema: Schema, kinds: Sequence[str]) -> bool:
    """Whether a batch of this schema and these key kinds may travel as JSON."""
    return all(kind in ("int", "text") for kind in kinds) and all(
        str(f.type) in SCALARS for f in schema.fields
    )


def wrap(statement: str, keys: Sequence[str], schema: Schema) -> str:
    """The batch ``statement`` (the base's layout) aggregated into one JSON array."""
    columns = ", ".join(quote(name) for name in [*keys, *schema.names])
    return f"SELECT JSON_ARRAYAGG(JSON_ARRAY({columns})) FROM ({statement}) AS b"


def _loads() -> Callable[[Any], Any]:
    try:
        import orjson
    except ImportError:
        return json.loads
    return orjson.loads


_parse_json = _loads()


def parse(rows: Sequence[Sequence[Any]]) -> list[Any]:
    """The rows of an aggregated batch's one result row (none: SQL NULL)."""
    if not rows or rows[0][0] is None:
        return []
    document = rows[0][0]
    parsed: list[Any] = _parse_json(document)
    return parsed
