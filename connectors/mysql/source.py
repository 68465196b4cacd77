"""MySqlLookup: the lookup source of the MySQL/MariaDB connector (see the package docstring)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aiomysql

from connectors.sql import Column, SqlLookup, SqlSettings

from . import pool as pools
from .describe import MYSQL_TYPES
from .errors import DRIVER_ERRORS, is_connection_lost, translate
from .scan import scan_pages

__all__ = ("MySqlLookup",)

_log = logging.getLogger("connectors.mysql")
T = TypeVar("T")

SCHEMES = ("mysql", "mariadb")
DEFAULT_PORT = 3306
# Keys per IN list: the statement's text grows with it (the driver escapes each key into
# it), and 500 keys keep a statement's text and parse time small on both servers.
DEFAULT_MAX_BATCH = 500


class MySqlLookup(SqlLookup):
    """A picklable description of a MySQL/MariaDB lookup, implementing ``enrich.LookupSource``.

    Guarantees (besides :class:`connectors.sql.SqlLookup`'s):

    * A batch's statement is ``IN (...)`` (a composite key's ``(a, b) IN ((..), (..))``);
      a schema omitted is read by ``connectors.mysql.describe``; a bad ``ssl-mode`` or CA
      file fails construction.
    * A connection that died in the pool (a restart) is replaced and the statement (or
      the reading of the plan) sent once more at once.
    * The server stops a statement after ``timeout`` seconds (MariaDB's
      ``max_statement_time``, MySQL's ``MAX_EXECUTION_TIME``), and the client stops
      waiting a second later.

    Args:
        url: ``mysql://[user[:password]@]host[:port]/database[?ssl-mode=...]`` (or
            ``mariadb://``); TLS from ``ssl-mode`` (``required``, ``verify_ca``,
            ``verify_identity``), ``ssl-ca``, ``ssl-cert``, ``ssl-key``.
        table: the dimension table (``"users"`` or ``"otherdb.users"``); or give ``query``.
        query: instead of ``table``: a ``SELECT`` with one ``:keys`` parameter (a list:
            ``WHERE u.id IN (:keys)``) returning the key column and the schema's fields.
        max_batch: most keys per statement (``DEFAULT_MAX_BATCH``, 500, when None).

    The other keyword arguments (``key``, ``schema``, ``full_query``, ``password``,
    ``pool_size``, ``max_lifetime``, ``timeout``, ``job_rate_limit``, ``concurrency``)
    are :class:`connectors.sql.SqlLookup`'s.
    """

    kind = "mysql"
    schemes = SCHEMES
    default_port = DEFAULT_PORT
    default_max_batch = DEFAULT_MAX_BATCH
    handles = pools.HANDLES
    column_types = MYSQL_TYPES

    def _check(self, settings: SqlSettings) -> None:
        pools.tls_context(settings)  # a bad ssl-mode or CA file fails now

    def _read_columns(self) -> list[Column]:
        from .describe import read_columns

        return read_columns(self._settings)

    async def _plan(self, handle: pools.Handle) -> pools.Plan:
        return await self._once_more(lambda: handle.plan(self.schema))

    async def _batch(self, handle: pools.Handle, plan: pools.Plan, keys: list[Any]) -> Any:
        return self._reader.answers(keys, await self._fetch(handle, plan, keys))

    async def _fetch(self, handle: pools.Handle, plan: pools.Plan, keys: list[Any]) -> list[Any]:
        return await self._once_more(lambda: handle.fetch(plan, keys))

    async def _once_more(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, made once more at once if the connection was lost (the pool
        replaces it); a driver error translated."""
        for attempt in (1, 2):
            try:
                return await call()
            except DRIVER_ERRORS as exc:
                if attempt == 1 and is_connection_lost(exc):
                    _log.debug("mysql connection lost, asking once more: %s", type(exc))
                    continue
                raise translate(exc, self._settings) from exc
        raise AssertionError("unreachable")

    # -- the full cache (ListableSource) ------------------------------------------------

    async def scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[Any, int]]:
        """The whole dimension ordered by key, in pages of about ``page_rows`` rows, read
        by one unbuffered statement (rows streamed, one consistent read): Arrow tables
        where every key has one plain row, else ``{store key: answer}`` (see
        ``connectors.mysql.scan``).

        Raises:
            LookupFailed: the server failed (the load is abandoned; the cache keeps its
                old snapshot).
        """
        settings = self._settings
        handle = pools.handle_for(settings)
        plan = await self._plan(handle)
        if plan.full_sql is None:
            raise ValueError("a full cache of a query= lookup needs full_query=")
        try:
            async with handle.connection() as conn, conn.cursor(aiomysql.SSCursor) as cursor:
                await cursor.execute(plan.full_sql)

                async def pages() -> AsyncIterator[list[Any]]:
                    while True:
                        page = await cursor.fetchmany(page_rows)
                        if not page:
                            return
                        yield list(page)

                async for answers in scan_pages(self._reader, pages(), page_rows):
                    yield answers
        except DRIVER_ERRORS as exc:
            raise translate(exc, settings) from exc
