"""A table's columns, read when a ``MySqlLookup`` is given no ``schema=`` (``SqlLookup``
maps them to the dimension schema).

Read once, on construction (the driver needs the schema to plan the join), over one
short-lived blocking PyMySQL connection (no event loop needed, whichever thread calls),
from ``information_schema.columns``; types are mapped by :mod:`connectors.sql.columns`,
with MySQL's own spellings added (``tinyint(1)`` is a boolean; ``json`` is text).
"""

from __future__ import annotations

import pymysql

from connectors.sql import Column, SqlSettings
from connectors.sql.target import columns_statement

from .errors import DRIVER_ERRORS, translate
from .pool import connect_options

__all__ = ("MYSQL_TYPES", "read_columns")

# MySQL's information_schema spellings that the base's table does not name.
# TIMESTAMP is an instant (stored in UTC; read in the session's UTC), DATETIME a wall-clock.
MYSQL_TYPES = {"json": "string", "year": "int", "bit": "binary", "timestamp": "timestamp"}


def read_columns(settings: SqlSettings) -> list[Column]:
    """The table's columns, in order (an empty list: no such table).

    Raises:
        LookupFailed: the server could not be asked (one line, no secret).
    """
    table = settings.target.table
    try:
        options = connect_options(settings)
        options["database"] = options.pop("db")  # PyMySQL's name of aiomysql's db=
        conn = pymysql.connect(**options)
        try:
            with conn.cursor() as cursor:
                cursor.execute(
                    columns_statement("%s", "COALESCE(%s, DATABASE())", "column_type"),
                    (table[-1], table[0] if len(table) == 2 else None),
                )
                rows = cursor.fetchall()
        finally:
            conn.close()
    except DRIVER_ERRORS as exc:
        raise translate(exc, settings) from None
    columns = []
    for name, data_type, precision, scale, column_type in rows:
        kind = str(data_type)
        if str(column_type).lower().startswith("tinyint(1)"):
            kind = "boolean"  # MySQL's BOOLEAN is tinyint(1)
        columns.append(Column(str(name), kind, precision, scale, str(column_type)))
    return columns
