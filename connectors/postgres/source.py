"""PostgresLookup: the lookup source of the PostgreSQL connector (see the package docstring)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from typing import Any

from connectors.sql import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_LIFETIME,
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    RowReader,
    SqlSettings,
    fit_key,
    store_key,
)
from enrich.spi import (
    AdaptiveLimit,
    JobRateLimit,
    LimitStatistics,
    LookupFailed,
    Schema,
    SchemaLike,
    answers_as_completed,
    close_limiter,
    forget_process_limit,
    peek_process_limit,
    short,
)

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


class PostgresLookup:
    """A picklable description of a PostgreSQL lookup, implementing ``enrich.LookupSource``.

    Guarantees:

    * Construction validates every setting (``ValueError`` naming it and the value) and
      opens nothing, unless ``schema`` is omitted: then the table's columns are read once
      (``connectors.postgres.describe``). The object holds no live state and pickles.
    * One statement per batch of at most ``max_batch`` keys (``= ANY($1)``; a composite
      key's arrays joined by ``unnest``), prepared once per connection and reused; the
      batches of a call run concurrently on at most ``pool_size`` connections per
      process and loop, shared by equal sources.
    * A key with one row answers a tuple, with several rows a list of them (a 1:N join),
      with none None (a miss). A row that does not fit the schema fails its key alone
      (``DecodeError``); so does a key the key column's type refuses (``kind="key"``).
    * A statement that fails gives its batch's keys the translated error; when every
      batch of a call failed, the call raises it (``SourceUnavailable`` when the server
      cannot be reached: retryable, so the engine's retry bridges a restart; a wrong
      password or a missing table or column is final). A connection that died in the
      pool (a restart) is replaced and the statement sent once more at once.
    * The server stops a statement after ``timeout`` seconds (``statement_timeout``).
    * No password (in the URL, a query parameter or the keyword) appears in a ``repr()``,
      a message or a log line.

    Args:
        url: ``postgresql://[user[:password]@]host[:port]/database[?sslmode=...]``;
            libpq's TLS parameters (``sslmode``, ``sslrootcert``, ``sslcert``,
            ``sslkey``) are honoured. Without a password, ``PGPASSWORD`` and
            ``~/.pgpass`` are read, as libpq does.
        table: the dimension table (``"users"`` or ``"app.users"``); or give ``query``.
        key: the key column, or a list of them for a composite key (in the order of the
            join's ``on`` columns).
        schema: the fields the lookup adds (Spark DDL, a mapping or a ``Schema``), read
            from columns of those names; None reads the table's other columns with
            their types mapped (``connectors.sql.columns``).
        query: instead of ``table``: a ``SELECT`` with one ``:keys`` parameter (an
            array: ``WHERE u.id = ANY(:keys)``) returning the key column and the
            schema's fields by name.
        full_query: with ``query``: the statement a ``FullCache`` loads (no parameter).
        password: the password, instead of the URL's (a job config's ``${file:...}``).
        pool_size: connections per process (statements in flight).
        max_lifetime: seconds a connection serves before it is replaced.
        timeout: seconds to connect, and each statement's limit on the server.
        max_batch: most keys per statement.
        job_rate_limit: keys per second for the *whole job*: a ``JobRateLimit`` naming
            the Redis holding the shared bucket (``redis_url``), or None.
        concurrency: ``"fixed"`` (``pool_size`` statements in flight) or ``"auto"`` (an
            adaptive limit up to ``pool_size``, backing off on timeouts and latency).
    """

    schema: Schema
    # lookup_many splits its keys into statements of max_batch itself: the columnar lane
    # hands it a chunk's keys in one call.
    splits_requests = True

    def __init__(
        self,
        url: str,
        *,
        table: str | None = None,
        key: str | Sequence[str] = "id",
        schema: SchemaLike | None = None,
        query: str | None = None,
        full_query: str | None = None,
        password: str | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        max_lifetime: float = DEFAULT_MAX_LIFETIME,
        timeout: float = DEFAULT_TIMEOUT,
        max_batch: int = DEFAULT_MAX_BATCH,
        job_rate_limit: float | JobRateLimit | None = None,
        concurrency: str = "fixed",
    ) -> None:
        self._settings = SqlSettings.of(
            "postgres",
            url,
            schemes=SCHEMES,
            default_port=DEFAULT_PORT,
            password=password,
            table=table,
            key=key,
            query=query,
            full_query=full_query,
            job_rate_limit=job_rate_limit,
            pool_size=pool_size,
            max_lifetime=max_lifetime,
            timeout=timeout,
            max_batch=max_batch,
            concurrency=concurrency,
        )
        if schema is None:
            from .describe import read_schema

            self.schema = read_schema(self._settings)
        else:
            self.schema = Schema.of(schema)
        self._init_derived()

    def _init_derived(self) -> None:
        target = self._settings.target
        where = f"postgres table {target.table_name!r}"
        self._reader = RowReader(self.schema, len(target.keys), where)

    # -- the LookupSource protocol ------------------------------------------------------

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Look up distinct keys: a row tuple, a list of rows, None or an error each.

        Raises:
            LookupFailed: every statement of the call failed (see the class docstring).
        """
        results: dict[Any, Any] = {}
        async for found in self._answers(keys, raise_all=True):
            results.update(found)
        return results

    async def lookup_each(self, keys: Sequence[Any]) -> AsyncIterator[Mapping[Any, Any]]:
        """Look up distinct keys as :meth:`lookup_many` does, handing each statement's
        answers over as soon as they arrive."""
        async for found in self._answers(keys, raise_all=True):
            yield found

    async def _answers(
        self, keys: Sequence[Any], *, raise_all: bool
    ) -> AsyncIterator[dict[Any, Any]]:
        if not keys:
            return
        settings = self._settings
        handle = pools.handle_for(settings)
        try:
            plan = await handle.plan(self.schema)
        except DRIVER_ERRORS as exc:
            raise translate(exc, settings) from exc
        refused: dict[Any, Any] = {}
        wanted: list[Any] = []
        for key in keys:
            try:
                wanted.append(fit_key(key, plan.kinds))
            except TypeError as exc:
                refused[key] = LookupFailed(
                    f"postgres table {settings.target.table_name!r}: key {short(key)}: {exc}",
                    key=key,
                    kind="key",
                    retryable=False,
                )
        if refused:
            yield refused
        size = settings.max_batch
        batches = [wanted[i : i + size] for i in range(0, len(wanted), size)]
        if not batches:
            return
        if len(batches) == 1:
            yield await self._batch(handle, plan.batch_sql, batches[0], alone=raise_all)
            return
        calls = {
            n: self._batch(handle, plan.batch_sql, b, alone=False) for n, b in enumerate(batches)
        }
        failures: list[LookupFailed] = []
        async for done in answers_as_completed(calls):
            for n, answers in done.items():
                if isinstance(answers, LookupFailed):
                    failures.append(answers)
                    answers = dict.fromkeys(batches[n], answers)
                yield answers
        if raise_all and batches and len(failures) == len(batches):
            raise failures[0]

    async def _batch(self, handle: pools.Handle, sql: str, keys: list[Any], *, alone: bool) -> Any:
        """One statement's answers; its failure raised (``alone``) or returned."""
        try:
            rows = await self._fetch(handle, sql, keys)
        except LookupFailed as exc:
            if alone:
                raise
            return exc
        except RefusedArgument:
            return await self._singly(handle, sql, keys)
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

    def store_key(self, key: Any) -> Hashable:
        """A lookup key as the table's rows name it (see ``connectors.sql.store_key``)."""
        return store_key(key)

    async def scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[dict[Any, Any], int]]:
        """The whole dimension in pages of about ``page_rows`` rows, read through one
        server-side cursor in one read-only transaction (one snapshot of the table); see
        ``connectors.postgres.scan``.

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

    async def lookup_arrow(self, keys: Any, struct_type: Any) -> Any:
        """The columnar lookup (``enrich.spi.ColumnarSource``): the same statements and
        outcomes as ``lookup_many``, rows handed over as Arrow columns."""
        decode = await self.fetch_arrow(keys, struct_type)
        return decode()

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Any:
        """``lookup_arrow`` split at the answer: the statements now (one row of column
        arrays per batch, see ``connectors.postgres.arrow``), the Arrow building returned
        as a step the caller runs on its own thread.

        Raises:
            LookupFailed: every statement of the call failed.
        """
        from .arrow import fetch  # pyarrow: needed on this path only

        return await fetch(self, keys, struct_type)

    # -- protections, lifecycle ---------------------------------------------------------

    def adaptive_limit(self) -> AdaptiveLimit | None:
        """With ``concurrency="auto"``: this process's adaptive limit, once a statement
        made it; else None (joins copy its state into their metrics)."""
        return peek_process_limit(pools.adaptive_key(self._settings))

    def concurrency_statistics(self) -> LimitStatistics | None:
        """With ``concurrency="auto"``: the adaptive limit's statistics, else None."""
        limit = self.adaptive_limit()
        return None if limit is None else limit.statistics()

    async def aclose(self) -> None:
        """Close this process's pool for these settings on the running loop (reopened by
        the next lookup; copies sharing it lose it too)."""
        settings = self._settings
        forget_process_limit(pools.adaptive_key(settings))
        if settings.job_rate_limit is not None:
            await close_limiter(settings.job_rate_limit)
        await pools.close_handle(settings)

    # -- value semantics ----------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"schema": self.schema, "_settings": self._settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_derived()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PostgresLookup):
            return NotImplemented
        return self._settings == other._settings and self.schema == other.schema

    def __hash__(self) -> int:
        return hash((self._settings, self.schema))

    def __repr__(self) -> str:
        return f"PostgresLookup({self._settings.described()}, schema={self.schema!r})"


__all__ = ("PostgresLookup",)
