"""A process's aiomysql pool for one source on one loop, and what it learns of the table.

A :class:`Handle` is opened lazily on the runtime loop (:func:`enrich.spi.loop_resource`):
equal sources of a process share it. It holds:

* the aiomysql pool: at most ``pool_size`` connections, opened on demand (none at
  start), in autocommit (each statement reads the table as it is now, never an old
  transaction's snapshot), ``utf8mb4``, each closed once it has served ``max_lifetime``
  seconds (checked when it is given back) or been idle for as long (``pool_recycle``);
  dead idle connections (a restart) are dropped by the pool on acquire; a connection
  whose statement failed or timed out is closed rather than given back, so the pool
  never hands out one in an unknown state;
* the :class:`Plan`, read once per handle: the server's flavour (MariaDB or MySQL: how a
  statement's time limit is spelled), the key columns' types (a key of the wrong type
  fails alone, before anything is sent: MySQL would compare ``'abc'`` with an integer
  column as 0), and the statements built from them, checked once against the table;
* the store protections: the adaptive limit's slots (``concurrency="auto"``) and the
  job-wide rate limit's share (``job_rate_limit``), kept as the other relational
  connector keeps them (``connectors.sql.handles``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiomysql
import pymysql

from connectors.sql import SqlSettings, batch_statement, full_statement
from connectors.sql.handles import HandleRegistry, SqlHandle
from enrich.spi import Schema, held_back

from . import aggregate
from .dialect import MySqlDialect, arguments, expand, key_kind, template
from .errors import code

__all__ = ("HANDLES", "Handle", "Plan", "connect_options", "handle_for")

_log = logging.getLogger("connectors.mysql")
REGISTRY = "connectors.mysql"
# The client gives the server's statement time limit this long to stop a statement
# before it stops waiting itself (either way the batch's outcome is a timeout).
_CLIENT_GRACE = 1.0
_SSL_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")


@dataclass
class Plan:
    """What one handle learned of the table, and the statements built from it.

    Attributes:
        kinds: per key column, what a key part must be (``connectors.sql.fit_key``).
        batch_template: the batch statement, its keys still a mark (``dialect.expand``).
        full_sql: the statement reading the whole dimension (None: the query form
            without ``full_query``).
        aggregated: the batch statement returns its rows as one JSON array
            (``connectors.mysql.aggregate``).
        statements: the batch statement per batch size, built on first use.
    """

    kinds: tuple[str, ...]
    batch_template: str
    full_sql: str | None
    aggregated: bool = False
    statements: dict[int, str] = field(default_factory=dict)

    def batch_sql(self, size: int) -> str:
        """The statement for a batch of ``size`` keys."""
        sql = self.statements.get(size)
        if sql is None:
            sql = self.statements[size] = expand(self.batch_template, size, len(self.kinds))
        return sql


def _time_limit(statement: str, seconds: float, mariadb: bool) -> str:
    # MariaDB: SET STATEMENT max_statement_time (seconds) FOR ...; MySQL 5.7.8+: the
    # MAX_EXECUTION_TIME optimizer hint (milliseconds) right after SELECT.
    if mariadb:
        return f"SET STATEMENT max_statement_time={seconds:g} FOR {statement}"
    assert statement.startswith("SELECT ")
    return f"SELECT /*+ MAX_EXECUTION_TIME({int(seconds * 1000)}) */ {statement[7:]}"


@dataclass(eq=False, kw_only=True)
class Handle(SqlHandle[Plan]):
    """A process's pool for one source's settings on one loop (see the module)."""

    pool: Any = None
    # When each pooled connection was opened (aiomysql's pool_recycle counts idle time).
    born: weakref.WeakKeyDictionary[Any, float] = field(default_factory=weakref.WeakKeyDictionary)

    async def _start(self) -> None:
        if self.pool is None:
            self.pool = await aiomysql.create_pool(**pool_options(self.settings))

    async def _read_plan(self, schema: Schema) -> Plan:
        target = self.settings.target
        dialect = MySqlDialect()
        statement = batch_statement(target, schema, dialect)
        async with self.connection() as conn:
            mariadb = "mariadb" in str(conn.get_server_info()).lower()
            if target.query is None:
                types = await _key_types(conn, target.table, target.keys)
                kinds = tuple(key_kind(types.get(k, "")) for k in target.keys)
            else:
                kinds = ("any",)
            batch = template(_time_limit(statement, self.settings.timeout, mariadb))
            plan = Plan(kinds=kinds, batch_template=batch, full_sql=None)
            async with conn.cursor() as cursor:  # a missing column or a bad query fails here
                await cursor.execute(plan.batch_sql(1), [None] * len(kinds))
                await cursor.fetchall()
                if aggregate.is_eligible(schema, kinds):
                    wrapped = aggregate.wrap(statement, target.keys, schema)
                    wrapped = template(_time_limit(wrapped, self.settings.timeout, mariadb))
                    candidate = Plan(kinds=kinds, batch_template=wrapped, full_sql=None)
                    try:
                        await cursor.execute(candidate.batch_sql(1), [None] * len(kinds))
                        await cursor.fetchall()
                    except pymysql.err.MySQLError as exc:
                        if code(exc) not in aggregate.UNSUPPORTED:
                            raise
                    else:
                        plan = candidate
                        plan.aggregated = True
        if target.query is None or target.full_query is not None:
            plan.full_sql = full_statement(target, schema, dialect)
        _log.debug("mysql plan for %s: %s", target.table_name, plan.batch_sql(1))
        return plan

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A pooled connection; closed instead of given back if its use failed.

        Waiting for a free connection has no time limit: it is back-pressure (a new
        connection's own connect is bounded by ``connect_timeout``), marked held back so
        that no row's timeout counts it."""
        with held_back():
            conn = await self.pool.acquire()
        born = self.born.setdefault(conn, time.monotonic())
        try:
            yield conn
        except BaseException:
            conn.close()  # its state is unknown (a statement may still be running)
            raise
        finally:
            if time.monotonic() - born > self.settings.max_lifetime:
                conn.close()  # the pool replaces a closed connection on demand
            self.pool.release(conn)

    async def fetch(self, plan: Plan, keys: list[Any]) -> list[Any]:
        """Run the batch statement for ``keys`` under the protections; its rows."""
        return await self.protections.run(
            len(keys), lambda: self._fetch(plan, keys), timeouts=(asyncio.TimeoutError,)
        )

    async def _fetch(self, plan: Plan, keys: list[Any]) -> list[Any]:
        sql = plan.batch_sql(len(keys))
        args = arguments(keys, len(plan.kinds))

        async with self.connection() as conn:

            async def run() -> list[Any]:
                async with conn.cursor() as cursor:
                    await cursor.execute(sql, args)
                    rows = list(await cursor.fetchall())
                return aggregate.parse(rows) if plan.aggregated else rows

            # Only the statement is timed: waiting for the pool is back-pressure.
            return await asyncio.wait_for(run(), self.settings.timeout + _CLIENT_GRACE)

    async def aclose(self) -> None:
        """Close the pool's connections (waiting for none: lookups are short)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.terminate()
            await pool.wait_closed()


async def _key_types(conn: Any, table: tuple[str, ...], keys: tuple[str, ...]) -> dict[str, str]:
    """The key columns' ``information_schema`` data types (a missing one: absent)."""
    async with conn.cursor() as cursor:
        await cursor.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s",
            (table[0] if len(table) == 2 else None, table[-1]),
        )
        return {str(name): str(kind) for name, kind in await cursor.fetchall()}


def tls_context(settings: SqlSettings) -> ssl.SSLContext | None:
    """The TLS context the URL asks for (``ssl-mode``, ``ssl-ca``, ``ssl-cert``,
    ``ssl-key``, as MySQL's clients name them; ``sslmode``/``sslrootcert`` too), or None.

    Raises:
        ValueError: an unknown ``ssl-mode``.
    """
    url = settings.url

    def param(*names: str) -> str | None:
        for name in names:
            value = url.param(name)
            if value is not None:
                return value
        return None

    ca = param("ssl-ca", "ssl_ca", "sslrootcert")
    mode = param("ssl-mode", "ssl_mode", "sslmode") or ("verify_ca" if ca else "disabled")
    mode = mode.lower().replace("-", "_")
    if mode not in _SSL_MODES:
        raise ValueError(f"ssl-mode must be one of {list(_SSL_MODES)}, got {mode!r}")
    if mode in ("disabled", "preferred"):
        return None
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = mode == "verify_identity"
    if mode == "required":
        context.verify_mode = ssl.CERT_NONE
    cert = param("ssl-cert", "ssl_cert", "sslcert")
    if cert:
        context.load_cert_chain(cert, param("ssl-key", "ssl_key", "sslkey"))
    return context


def connect_options(settings: SqlSettings) -> dict[str, Any]:
    """aiomysql's (and PyMySQL's) connection arguments for ``settings``."""
    url = settings.url
    return {
        "host": url.host,
        "port": url.port,
        "user": url.username or "",
        "password": url.password or "",
        "db": url.database or None,
        "connect_timeout": settings.timeout,
        "charset": "utf8mb4",
        "autocommit": True,
        "ssl": tls_context(settings),
        "program_name": "spark-enrich",
        # TIMESTAMP columns come back in the session's zone: UTC, as a timestamp field
        # reads a naive datetime.
        # group_concat_max_len bounds MariaDB's JSON_ARRAYAGG (connectors.mysql.aggregate).
        "init_command": "SET time_zone = '+00:00', group_concat_max_len = 1073741824",
    }


def pool_options(settings: SqlSettings) -> dict[str, Any]:
    return {
        "minsize": 0,
        "maxsize": settings.pool_size,
        "pool_recycle": settings.max_lifetime,
        **connect_options(settings),
    }


def _open(settings: SqlSettings, loop: asyncio.AbstractEventLoop) -> Handle:
    _log.debug(
        "opening mysql pool for %s (pool_size=%d)", settings.url.masked(), settings.pool_size
    )
    return Handle(loop=loop, settings=settings, protections=HANDLES.protections(settings))


HANDLES = HandleRegistry(REGISTRY, _open)
handle_for = HANDLES.handle_for  # this process's handle for the settings on the running loop
