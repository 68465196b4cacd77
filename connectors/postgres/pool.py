"""A process's asyncpg pool for one source on one loop, and what it learns of the table.

A :class:`Handle` is opened lazily on the runtime loop (:func:`enrich.spi.loop_resource`):
equal sources of a process share it. It holds:

* the asyncpg pool: at most ``pool_size`` connections, opened on demand (none at start),
  each closed once it has served ``max_lifetime`` seconds (checked when it is given
  back) or been idle for as long; a connection sets ``statement_timeout`` on the server
  and ``application_name = 'spark-enrich'``; asyncpg prepares each statement once per
  connection and reuses it (its statement cache), and the pool's per-release reset
  round trip is skipped (the lookups change no session state);
* the :class:`Plan`, read once per handle: the key columns' types (so that a key of the
  wrong type fails alone, before the statement is sent, and a composite key's arrays are
  cast) and the statements built from them;
* the store protections: the adaptive limit's slots (``concurrency="auto"``) and the
  job-wide rate limit's share (``job_rate_limit``), kept as the other relational
  connector keeps them (``connectors.sql.handles``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote as url_quote, urlencode

import asyncpg

from connectors.sql import SqlSettings, batch_statement, full_statement
from connectors.sql.handles import HandleRegistry, SqlHandle
from enrich.spi import Schema, held_back

from .dialect import (
    CSV_FIELDS,
    PgDialect,
    aggregate_statement,
    csv_statement,
    is_bulk,
    is_identity,
    key_kind,
    quote,
)

_log = logging.getLogger("connectors.postgres")
REGISTRY = "connectors.postgres"
# The client gives the server's statement_timeout this long to cancel a statement before
# it stops waiting itself (either way the key's outcome is a timeout).
_CLIENT_GRACE = 1.0
# What the adaptive limit counts as throttling: the client's wait or the server's cancel.
_TIMEOUTS = (asyncio.TimeoutError, asyncpg.QueryCanceledError)


class _Connection(asyncpg.Connection):  # type: ignore[misc]
    """A connection that knows its age (asyncpg's pool has no lifetime of its own)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.born = time.monotonic()


async def _no_reset(connection: Any) -> None:
    """The pool's reset on release, skipped: lookups change no session state."""


@dataclass(frozen=True)
class Plan:
    """What one handle learned of the table, and the statements built from it.

    Attributes:
        kinds: per key column, what a key part must be (``connectors.sql.fit_key``).
        batch_sql: the statement answering a batch of keys.
        arrow_sql: the same, as one row of column arrays (``connectors.postgres.arrow``);
            "" where the fields' column types need the per-row decoder.
        csv_sql: the same as one CSV text (``connectors.postgres.arrow``), where the key is
            unique and every field a plain type read unconverted; else "".
        identity: every field's column gives values the schema takes unconverted.
        unique: a unique index holds the key column(s): one row per key, and the full
            load needs no ORDER BY.
        full_sql: the statement reading the whole dimension (None: the query form
            without ``full_query``).
    """

    kinds: tuple[str, ...]
    batch_sql: str
    full_sql: str | None
    arrow_sql: str = ""
    csv_sql: str = ""
    identity: bool = False
    unique: bool = False


@dataclass(eq=False, kw_only=True)
class Handle(SqlHandle[Plan]):
    """A process's pool for one source's settings on one loop (see the module)."""

    pool: asyncpg.Pool
    _started: bool = False

    async def _start(self) -> None:
        if not self._started:
            await self.pool  # creates no connection: min_size is 0
            self._started = True

    async def _read_plan(self, schema: Schema) -> Plan:
        target = self.settings.target
        async with self.connection() as conn:
            if target.query is None:
                probe = (
                    f"SELECT {', '.join(quote(k) for k in target.keys)} FROM "
                    f"{'.'.join(quote(p) for p in target.table)} WHERE false"
                )
                types = [a.type for a in (await conn.prepare(probe)).get_attributes()]
                dialect = PgDialect(tuple(f"{quote(t.schema)}.{quote(t.name)}" for t in types))
                kinds = tuple(key_kind(t.name) for t in types)
            else:
                dialect = PgDialect()
                sql = batch_statement(target, schema, dialect)
                parameter = (await conn.prepare(sql)).get_parameters()[0]
                kinds = (key_kind(parameter.name.removesuffix("[]").removeprefix("_")),)
            sql = batch_statement(target, schema, dialect)
            fields = (await conn.prepare(sql)).get_attributes()[len(target.keys) :]
            identity = is_identity(schema, [c.type.name for c in fields])
            unique = target.query is None and await _is_unique(conn, target)
            arrow_sql = aggregate_statement(sql, [*target.keys, *schema.names], quote)
            columns = (await conn.prepare(arrow_sql)).get_attributes()[len(target.keys) :]
            if not is_bulk(schema, len(target.keys), [c.type.name for c in columns]):
                arrow_sql = ""  # the columnar lookup decodes row by row
            csv_sql = ""
            if (
                arrow_sql
                and unique
                and identity
                and kinds in (("int",), ("text",))
                and all(str(f.type) in CSV_FIELDS for f in schema.fields)
            ):
                csv_sql = csv_statement(sql, [(target.keys[0], "text" in kinds)], schema)
                await conn.prepare(csv_sql)
        full = None
        if target.query is None or target.full_query is not None:
            full = full_statement(target, schema, dialect, ordered=not unique)
        _log.debug("postgres plan for %s: %s", target.table_name, sql)
        return Plan(
            kinds=kinds,
            batch_sql=sql,
            full_sql=full,
            arrow_sql=arrow_sql,
            csv_sql=csv_sql,
            identity=identity,
            unique=unique,
        )

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A pooled connection; one past ``max_lifetime`` is closed when given back."""
        # No time limit on waiting for a pooled connection: that wait is back-pressure
        # (statements queued behind the pool's size), not the server's slowness, so it
        # is marked held back and no row's timeout counts it; opening a connection has
        # its own limit (the connect timeout).
        with held_back():
            conn = await self.pool.acquire()
        try:
            yield conn
        finally:
            if time.monotonic() - conn.born > self.settings.max_lifetime:
                conn.terminate()  # the pool replaces a closed connection on demand
            await self.pool.release(conn)

    async def fetch(self, sql: str, args: list[Any], keys: int) -> list[Any]:
        """Run one statement under the protections; its rows."""

        async def statement() -> list[Any]:
            async with self.connection() as conn:
                rows: list[Any] = await conn.fetch(
                    sql, *args, timeout=self.settings.timeout + _CLIENT_GRACE
                )
                return rows

        return await self.protections.run(keys, statement, timeouts=_TIMEOUTS)

    async def aclose(self) -> None:
        """Close the pool's connections (waiting for none: lookups are short)."""
        if self._started:
            self.pool.terminate()


async def _is_unique(conn: Any, target: Any) -> bool:
    """Whether a unique index (no predicate) has exactly the key columns."""
    found = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = $1::regclass "
        "AND i.indisunique AND i.indpred IS NULL AND i.indnkeyatts = $2 "
        "AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a "
        "WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = $3::text[])",
        ".".join(quote(p) for p in target.table),
        len(target.keys),
        sorted(target.keys),
    )
    return bool(found)


def dsn(settings: SqlSettings) -> str:
    """The connection string without the password (given to asyncpg apart)."""
    url = settings.url
    user = f"{url_quote(url.username, safe='')}@" if url.username else ""
    query = f"?{urlencode(url.params)}" if url.params else ""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"postgresql://{user}{host}:{url.port}/{url_quote(url.database, safe='')}{query}"


def connect_options(settings: SqlSettings) -> dict[str, Any]:
    """asyncpg's connection arguments for ``settings`` (also used to read the columns)."""
    return {
        "dsn": dsn(settings),
        "password": settings.url.password,
        "timeout": settings.timeout,
        "command_timeout": settings.timeout + _CLIENT_GRACE,
        "server_settings": {
            "statement_timeout": str(int(settings.timeout * 1000)),
            "application_name": "spark-enrich",
            # What the text paths (CSV answers, COPY) read: ISO dates, exact floats.
            "DateStyle": "ISO, MDY",
            "extra_float_digits": "3",
        },
    }


def _open(settings: SqlSettings, loop: asyncio.AbstractEventLoop) -> Handle:
    _log.debug(
        "opening postgres pool for %s (pool_size=%d)", settings.url.masked(), settings.pool_size
    )
    pool = asyncpg.create_pool(
        min_size=0,
        max_size=settings.pool_size,
        max_inactive_connection_lifetime=settings.max_lifetime,
        connection_class=_Connection,
        reset=_no_reset,
        **connect_options(settings),
    )
    return Handle(
        pool=pool, loop=loop, settings=settings, protections=HANDLES.protections(settings)
    )


HANDLES = HandleRegistry(REGISTRY, _open)
handle_for = HANDLES.handle_for  # this process's handle for the settings on the running loop

__all__ = ("HANDLES", "Handle", "Plan", "connect_options", "handle_for")
