"""SqlLookup: what a relational lookup source does whatever its driver.

``connectors.postgres.PostgresLookup`` and ``connectors.mysql.MySqlLookup`` subclass it,
naming their store (``kind``, URL schemes, default port and batch size), their handles
(:class:`~connectors.sql.handles.HandleRegistry`) and the driver's steps: reading the
plan, sending one batch, the full scan, the columnar lookup.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from typing import Any, ClassVar

from enrich.spi import (
    AdaptiveLimit,
    JobRateLimit,
    LimitStatistics,
    LookupFailed,
    Schema,
    SchemaLike,
    close_limiter,
    forget_process_limit,
    peek_process_limit,
    short,
    take_waits,
)

from .answers import RowReader, store_key
from .batches import batch_answers
from .columns import Column, schema_from_columns
from .handles import HandleRegistry
from .settings import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_LIFETIME,
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    SqlSettings,
)

__all__ = ("SqlLookup",)


class SqlLookup:
    """A picklable description of a relational lookup, implementing ``enrich.LookupSource``.

    Guarantees (a subclass's docstring adds its driver's):

    * Construction validates every setting (``ValueError`` naming it and the value) and
      opens nothing, unless ``schema`` is omitted: then the table's columns are read once
      (the connector's ``describe``). The object holds no live state and pickles; equal
      settings and schemas make equal sources (sharing a process's pool).
    * One statement per batch of at most ``max_batch`` keys; the batches of a call run
      concurrently on at most ``pool_size`` connections per process and loop
      (``connectors.sql.batches``).
    * A Spark join on its defaults admits :attr:`preferred_capacity` rows per task (four
      statements per connection), not the 131072 of a Redis join: what the pool
      answers well within ``timeout`` on a busy machine.
    * A key with one row answers a tuple, with several rows a list of them (a 1:N join),
      with none None (a miss). A row that does not fit the schema fails its key alone
      (``DecodeError``); so does a key of the wrong type for its column (``kind="key"``),
      checked before anything is sent.
    * A statement that fails gives its batch's keys the translated error; when every
      batch of a call failed, the call raises it (``SourceUnavailable`` when the server
      cannot be reached: retryable, so the engine's retry bridges a restart; a wrong
      password or a missing table or column is final).
    * No password (in the URL, a query parameter or the keyword) appears in a ``repr()``,
      a message or a log line.

    Args:
        url: the database's URL (its forms: the subclass).
        table: the dimension table (``"users"`` or ``"schema.users"``); or give ``query``.
        key: the key column, or a list of them for a composite key (in the order of the
            join's ``on`` columns).
        schema: the fields the lookup adds (Spark DDL, a mapping or a ``Schema``), read
            from columns of those names; None reads the table's other columns with
            their types mapped (``connectors.sql.columns``).
        query: instead of ``table``: a ``SELECT`` with one ``:keys`` parameter returning
            the key column and the schema's fields by name (its form: the subclass).
        full_query: with ``query``: the statement a ``FullCache`` loads (no parameter).
        password: the password, instead of the URL's (a job config's ``${file:...}``).
        pool_size: connections per process (statements in flight).
        max_lifetime: seconds a connection serves before it is replaced.
        timeout: seconds to connect, and each statement's limit on the server.
        max_batch: most keys per statement (None: the connector's
            ``default_max_batch``).
        job_rate_limit: keys per second for the *whole job*: a ``JobRateLimit`` naming
            the Redis holding the shared bucket (``redis_url``), or None.
        concurrency: ``"fixed"`` (``pool_size`` statements in flight) or ``"auto"`` (an
            adaptive limit up to ``pool_size``, backing off on timeouts and latency).
    """

    kind: ClassVar[str]  # the store's name in messages, logs and the job limit's name
    schemes: ClassVar[tuple[str, ...]]
    default_port: ClassVar[int]
    default_max_batch: ClassVar[int] = DEFAULT_MAX_BATCH
    handles: ClassVar[HandleRegistry[Any]]
    # The server's own spellings of column types (information_schema) the base's map lacks.
    column_types: ClassVar[Mapping[str, str] | None] = None

    schema: Schema
    # lookup_many splits its keys into statements of max_batch itself: the columnar lane
    # hands it a chunk's keys in one call.
    splits_requests = True

    @property
    def preferred_capacity(self) -> int:
        """Rows in flight per task a Spark join admits when its ``capacity`` is not
        set (``enrich.LookupSource``): four statements of ``max_batch`` keys per pool
        connection (``4 * pool_size * max_batch``), which the pool answers well within
        ``timeout`` on a busy machine. Its chunks are a quarter of it."""
        return self._settings.preferred_capacity

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
        max_batch: int | None = None,
        job_rate_limit: float | JobRateLimit | None = None,
        concurrency: str = "fixed",
    ) -> None:
        self._settings = SqlSettings.of(
            self.kind,
            url,
            schemes=self.schemes,
            default_port=self.default_port,
            password=password,
            table=table,
            key=key,
            query=query,
            full_query=full_query,
            job_rate_limit=job_rate_limit,
            pool_size=pool_size,
            max_lifetime=max_lifetime,
            timeout=timeout,
            max_batch=self.default_max_batch if max_batch is None else max_batch,
            concurrency=concurrency,
        )
        self._check(self._settings)
        self.schema = self._describe() if schema is None else Schema.of(schema)
        self._init_derived()

    def _init_derived(self) -> None:
        target = self._settings.target
        where = f"{self.kind} table {target.table_name!r}"
        self._reader = RowReader(self.schema, len(target.keys), where)

    # -- the driver's steps ---------------------------------------------------------------

    def _check(self, settings: SqlSettings) -> None:
        """Fail now on a setting only the driver can judge (none by default)."""

    def _describe(self) -> Schema:
        """The dimension schema of the table's non-key columns (``schema=`` omitted), their
        types mapped by ``connectors.sql.columns`` and the connector's ``column_types``.

        Raises:
            ValueError: the query form (it needs ``schema=``), no such table, no key column.
            UnmappableColumn: a column's type maps to no dimension type.
            LookupFailed: the server could not be asked (one line, no secret).
        """
        target = self._settings.target
        if target.query is not None:
            raise ValueError("query= needs schema= (the fields the query returns)")
        return schema_from_columns(
            self._read_columns(),
            table=repr(target.table_name),
            keys=target.keys,
            extra=self.column_types,
        )

    def _read_columns(self) -> list[Column]:
        """The table's columns, in order (an empty list: no such table), read once over a
        short-lived connection of its own.

        Raises:
            LookupFailed: the server could not be asked (one line, no secret).
        """
        raise NotImplementedError

    async def _plan(self, handle: Any) -> Any:
        """``handle``'s plan for the schema (``kinds``: what each key part must be).

        Raises:
            LookupFailed: the translated driver error.
        """
        raise NotImplementedError

    async def _batch(self, handle: Any, plan: Any, keys: list[Any]) -> dict[Any, Any]:
        """One statement's answers for ``keys`` (fitted, distinct).

        Raises:
            LookupFailed: the statement failed (every key of the batch shares it).
        """
        raise NotImplementedError

    # -- the LookupSource protocol ------------------------------------------------------

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Look up distinct keys: a row tuple, a list of rows, None or an error each.

        Raises:
            LookupFailed: every statement of the call failed (see the class docstring).
        """
        results: dict[Any, Any] = {}
        async for found in self._answers(keys):
            results.update(found)
        return results

    async def lookup_each(self, keys: Sequence[Any]) -> AsyncIterator[Mapping[Any, Any]]:
        """Look up distinct keys as :meth:`lookup_many` does, handing each statement's
        answers over as soon as they arrive."""
        async for found in self._answers(keys):
            yield found

    async def _answers(self, keys: Sequence[Any]) -> AsyncIterator[dict[Any, Any]]:
        if not keys:
            return
        handle = self.handles.handle_for(self._settings)
        plan = await self._plan(handle)
        answers = batch_answers(
            keys,
            kinds=plan.kinds,
            max_batch=self._settings.max_batch,
            refused=self._refused,
            send=lambda batch: self._batch(handle, plan, batch),
        )
        async for found in answers:
            yield found

    def _refused(self, key: Any, exc: TypeError) -> LookupFailed:
        """The answer of a key its column's type refuses (final: asking again won't help)."""
        table = self._settings.target.table_name
        return LookupFailed(
            f"{self.kind} table {table!r}: key {short(key)}: {exc}",
            key=key,
            kind="key",
            retryable=False,
        )

    # -- the full cache (ListableSource), the columnar lookup ---------------------------

    def store_key(self, key: Any) -> Hashable:
        """A lookup key as the table's rows name it (see ``connectors.sql.store_key``)."""
        return store_key(key)

    async def lookup_arrow(self, keys: Any, struct_type: Any) -> Any:
        """The columnar lookup (``enrich.spi.ColumnarSource``): the same statements and
        outcomes as ``lookup_many``, rows handed over as Arrow columns."""
        decode = await self.fetch_arrow(keys, struct_type)
        return decode()

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Any:
        """``lookup_arrow`` split at the answer: the statements now, the Arrow building
        returned as a step the caller runs on its own thread."""
        from enrich.spi import answer_from_mapping

        wanted = keys.to_pylist()
        found = await self.lookup_many(wanted)
        return lambda: answer_from_mapping(wanted, found, struct_type)

    # -- protections, lifecycle ---------------------------------------------------------

    def rate_limit_waits(self) -> tuple[int, float]:
        """With ``job_rate_limit``: this process's waits for its permits (how many, and
        their seconds) since the last call; joins add them to their metrics."""
        return take_waits(self._settings.job_rate_limit)

    def adaptive_limit(self) -> AdaptiveLimit | None:
        """With ``concurrency="auto"``: this process's adaptive limit, once a statement
        made it; else None (joins copy its state into their metrics)."""
        return peek_process_limit(self.handles.adaptive_key(self._settings))

    def concurrency_statistics(self) -> LimitStatistics | None:
        """With ``concurrency="auto"``: the adaptive limit's statistics, else None."""
        limit = self.adaptive_limit()
        return None if limit is None else limit.statistics()

    async def aclose(self) -> None:
        """Close this process's pool for these settings on the running loop (reopened by
        the next lookup; copies sharing it lose it too)."""
        settings = self._settings
        forget_process_limit(self.handles.adaptive_key(settings))
        if settings.job_rate_limit is not None:
            await close_limiter(settings.job_rate_limit)
        await self.handles.close_handle(settings)

    # -- value semantics ----------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"schema": self.schema, "_settings": self._settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_derived()

    def __eq__(self, other: object) -> bool:
        # Sources of one connector compare (a PostgresLookup never equals a MySqlLookup).
        if not isinstance(other, SqlLookup) or other.kind != self.kind:
            return NotImplemented
        return self._settings == other._settings and self.schema == other.schema

    def __hash__(self) -> int:
        return hash((self._settings, self.schema))

    def __repr__(self) -> str:
        settings = self._settings
        defaults = SqlSettings(
            url=settings.url, target=settings.target, max_batch=self.default_max_batch
        )
        described = settings.described(defaults)
        return f"{type(self).__name__}({described}, schema={self.schema!r})"
