"""PostgresLookup: the lookup source of the PostgreSQL connector (see the package docstring)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from connectors.sql import Column, SqlLookup
from enrich.spi import LookupFailed

from . import pool as pools
from .errors import (
    DRIVER_ERRORS,
    RefusedArgument,
    is_bad_argument,
    is_connection_lost,
    translate,
)

_log = logging.getLogger("connectors.postgres")

SCHEMES = ("postgresql", "postgres")
DEFAULT_PORT = 5432
# Keys per statement: one array parameter, whatever its length, and the server's cost
# per key falls as statements grow (its per-statement work spread over more keys:
# 3.9 us of server CPU a key at 1,000 keys, 2.7 at 5,000, measured with 1M rows).
DEFAULT_MAX_BATCH = 5000


class PostgresLookup(SqlLookup):
    """A picklable description of a PostgreSQL lookup, implementing ``enrich.LookupSource``.

    Guarantees (besides :class:`connectors.sql.SqlLookup`'s):

    * A batch's statement is ``= ANY($1)`` (a composite key's arrays joined by
      ``unnest``), prepared once per connection and reused; a schema omitted is read by
      ``connectors.postgres.describe``.
    * A key the key column's type refuses when the driver encodes the batch fails alone:
      the batch is asked again key by key.
    * A statement that fails alone (the call's only batch) raises its translated error.
      A connection that died in the pool (a restart) is replaced and the statement sent
      once more at once.
    * The server stops a statement after ``timeout`` seconds (``statement_timeout``).

    Args:
        url: ``postgresql://[user[:password]@]host[:port]/database[?sslmode=...]``;
            libpq's TLS parameters (``sslmode``, ``sslrootcert``, ``sslcert``,
            ``sslkey``) are honoured. Without a password, ``PGPASSWORD`` and
            ``~/.pgpass`` are read, as libpq does.
        table: the dimension table (``"users"`` or ``"app.users"``); or give ``query``.
        query: instead of ``table``: a ``SELECT`` with one ``:keys`` parameter (an
            array: ``WHERE u.id = ANY(:keys)``) returning the key column and the
            schema's fields by name.

    The other keyword arguments (``key``, ``schema``, ``full_query``, ``password``,
    ``pool_size``, ``max_lifetime``, ``timeout``, ``max_batch``: default
    ``DEFAULT_MAX_BATCH``, 5000 keys, ``job_rate_limit``, ``concurrency``) are
    :class:`connectors.sql.SqlLookup`'s.
    """

    kind = "postgres"
    schemes = SCHEMES
    default_port = DEFAULT_PORT
    default_max_batch = DEFAULT_MAX_BATCH
    handles = pools.HANDLES

    def _read_columns(self) -> list[Column]:
        from .describe import read_columns

        return read_columns(self._settings)

    async def _plan(self, handle: pools.Handle) -> pools.Plan:
        try:
            return await handle.plan(self.schema)
        except DRIVER_ERRORS as exc:
            raise translate(exc, self._settings) from exc

    async def _batch(self, handle: pools.Handle, plan: pools.Plan, keys: list[Any]) -> Any:
        try:
            rows = await self._fetch(handle, plan.batch_sql, keys)
        except RefusedArgument:
            return await self._singly(handle, plan.batch_sql, keys)
        return self._reader.answers(keys, rows)

    async def _fetch(self, handle: pools.Handle, sql: str, keys: list[Any]) -> list[Any]:
        settings = self._settings
        if len(settings.target.keys) == 1:
            args: list[Any] = [keys]
        else:
            args = [list(column) for column in zip(*keys, strict=True)]
        for attempt in (1, 2):
            try:
                return await handle.fetch(sql, args, len(keys))
            except DRIVER_ERRORS as exc:
                if attempt == 1 and is_connection_lost(exc):
                    _log.debug("postgres connection lost, asking once more: %s", type(exc))
                    continue
                if is_bad_argument(exc) and len(keys) > 1:
                    raise RefusedArgument from exc
                raise translate(exc, settings) from exc
        raise AssertionError("unreachable")

    async def _singly(self, handle: pools.Handle, sql: str, keys: list[Any]) -> dict[Any, Any]:
        # A key the column's type refused (asyncpg encodes the array before sending):
        # ask key by key, so that only the refused keys fail.
        results: dict[Any, Any] = {}
        for key in keys:
            try:
                rows = await self._fetch(handle, sql, [key])
            except LookupFailed as exc:
                exc.key = key
                results[key] = exc
                continue
            results.update(self._reader.answers([key], rows))
        return results

    # -- the full cache (ListableSource) ------------------------------------------------

    async def scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[Any, int]]:
        """The whole dimension, read by one statement in one read-only transaction (one
        snapshot of the table): one Arrow table by ``COPY``, or pages of about
        ``page_rows`` rows through a server-side cursor; see ``connectors.postgres.scan``.

        Raises:
            LookupFailed: the server failed (the load is abandoned; the cache keeps its
                old snapshot).
        """
        from .scan import scan_pages

        settings = self._settings
        handle = pools.handle_for(settings)
        try:
            plan = await handle.plan(self.schema)
            async for page in scan_pages(handle, plan, self._reader, page_rows):
                yield page
        except DRIVER_ERRORS as exc:
            raise translate(exc, settings) from exc

    # -- the columnar lookup ------------------------------------------------------------

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Any:
        """``lookup_arrow`` split at the answer: the statements now (one row of column
        arrays per batch, see ``connectors.postgres.arrow``), the Arrow building returned
        as a step the caller runs on its own thread.

        Raises:
            LookupFailed: every statement of the call failed.
        """
        from .arrow import fetch  # pyarrow: needed on this path only

        return await fetch(self, keys, struct_type)


__all__ = ("PostgresLookup",)
