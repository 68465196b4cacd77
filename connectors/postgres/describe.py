"""A table's columns, read when a ``PostgresLookup`` is given no ``schema=`` (``SqlLookup``
maps them to the dimension schema).

Read once, on construction (the driver needs the schema to plan the join), over one
short-lived connection on a loop of its own (a thread's when the caller runs a loop), from
``information_schema.columns``; types are mapped by :mod:`connectors.sql.columns`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import asyncpg

from connectors.sql import Column, SqlSettings
from connectors.sql.target import columns_statement

from .errors import DRIVER_ERRORS, translate
from .pool import connect_options


async def _read(settings: SqlSettings) -> list[Column]:
    table = settings.target.table
    conn = await asyncpg.connect(**connect_options(settings))
    try:
        if len(table) == 2:
            namespace = table[0]
        else:
            namespace = await conn.fetchval("SELECT current_schema()")
        rows = await conn.fetch(columns_statement("$1", "$2", "udt_name"), table[-1], namespace)
    finally:
        await conn.close()
    return [Column(r[0], r[1], r[2], r[3], r[4]) for r in rows]


def read_columns(settings: SqlSettings) -> list[Column]:
    """The table's columns, in order (an empty list: no such table).

    Raises:
        LookupFailed: the server could not be asked (one line, no secret).
    """

    def run() -> list[Column]:
        return asyncio.run(_read(settings))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _translated(run, settings)
    # A running loop on this thread: ask from another thread's loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(_translated, run, settings).result()


def _translated(run: Any, settings: SqlSettings) -> list[Column]:
    try:
        columns: list[Column] = run()
    except DRIVER_ERRORS as exc:
        raise translate(exc, settings) from None
    return columns
