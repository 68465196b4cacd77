"""HttpLookup: the lookup source of the HTTP connector (see the package docstring)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp

from enrich.spi import (
    AdaptiveLimit,
    DecodeError,
    JobRateLimit,
    LimitStatistics,
    LookupFailed,
    LoopLocal,
    Schema,
    SchemaLike,
    answers_as_completed,
    close_limiter,
    forget_process_limit,
    peek_process_limit,
    short,
    take_waits,
)

from . import body
from .batch import Batches
from .listing import scan_pages, store_key as listing_store_key
from .pool import Pool, adaptive_key
from .request import send
from .settings import (
    DEFAULT_CONCURRENCY,
    DEFAULT_FOLLOW_REDIRECTS,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_VALUE_BYTES,
    DEFAULT_METHOD,
    DEFAULT_TIMEOUT,
    RedirectPolicy,
    Settings,
)
from .url import KeyShapeError, UrlTemplate

_REGISTRY = "connectors.http"

# The connector's one logger, whichever of its modules logs.
_log = logging.getLogger("connectors.http")

# lookup_arrow and fetch_arrow (see enrich.spi): Arrow keys and struct type in.
ArrowLookup = Callable[[Any, Any], Awaitable[Any]]


class HttpLookup:
    """A :class:`~enrich.LookupSource` reading JSON documents from an HTTP service.

    Guarantees:

    * A key fills its URL slot percent-encoded: it can never change the scheme, host,
      port, or the path and query structure of the request (see ``connectors.http.url``).
    * Per-key mode: each key gets one request and fails alone (its value is the
      ``LookupFailed`` or ``DecodeError``); at most ``max_connections`` requests are in
      flight per process and, with ``rate_limit``, at most that many start per second
      in this process (in bursts of at most a tenth of a second's worth).
    * With ``job_rate_limit``, the requests of all processes sharing its bucket start at
      most at that rate together (see ``enrich.protect.limiter``); an unreachable
      limiter slows requests to its fallback rate, it never fails them.
    * With ``concurrency="auto"``, requests in flight per process follow an adaptive
      limit between 1 and ``max_connections`` (see ``enrich.protect.adaptive``): it
      backs off on 429, 503, timeouts and latency above the target.
    * Batch mode: a POST that fails gives every key of its chunk that error; when every
      chunk of the call failed, ``lookup_many`` raises it instead.
    * Batch mode only: the source is a :class:`~enrich.spi.ColumnarSource`
      (``lookup_arrow``, ``fetch_arrow``; see ``connectors.http.arrow``), with the same
      requests and the same outcome per key as ``lookup_many``. A per-key source has
      neither attribute, so joins keep handing each GET's answer over as it arrives.
    * One attempt per call: retries belong to the engine.
    * Configured headers and credentials go to the template's origin only: redirects are
      not followed unless ``follow_redirects="same-origin"``, and never elsewhere.
    * No body longer than ``max_value_bytes`` is read whole: a declared Content-Length
      over it is refused unread, an undeclared one is read in chunks up to the limit.
    * The object is a picklable description; its aiohttp session is created lazily on the
      running loop and shared by equal sources of the process.

    Args:
        url_template: ``http(s)`` URL with ``{}`` slots in path segments or query values; a
            tuple key fills several slots in order.
        schema: the dimension fields (Spark DDL, a mapping or a ``Schema``).
        method: ``"GET"`` or ``"POST"`` (per-key requests, no body).
        headers: sent with every request; values are secret (masked in ``repr``).
        auth: ``(login, password)`` or an ``aiohttp.BasicAuth``, sent as a Basic
            ``Authorization`` header.
        batch_url: ``http(s)`` URL without slots; switches to batch mode.
        max_batch: keys per batch POST.
        rate_limit: requests per second *per process* (None: unlimited).
        job_rate_limit: requests per second for the *whole job*: a
            :class:`~enrich.protect.JobRateLimit` naming the Redis that holds the
            shared budget (``redis_url``), or None. A batch POST counts as one request.
        max_connections: connections (and requests in flight) per process; None: 100,
            or 1000 with ``concurrency="auto"`` (the ceiling of the adaptive limit).
        concurrency: ``"fixed"`` (``max_connections`` requests in flight) or ``"auto"``
            (an adaptive limit up to ``max_connections``, see :meth:`concurrency_statistics`).
        timeout: seconds per request, from sending to reading the whole body.
        path: dotted path of the sub-document to read (``"data.user"``).
        fields: schema field -> dotted path within the document (default: the field name).
        follow_redirects: ``"never"`` (a 3xx is the key's error, ``kind="redirect"``,
            naming the masked target) or ``"same-origin"`` (follow up to 5 redirects to
            the same scheme, host and port; any other target is refused the same way).
        max_value_bytes: the longest body read for one answer (one batch answer in batch
            mode); a longer one stops being read and fails with ``kind="too_large"``.
        list_url: for ``enrich.FullCache``: a list endpoint with one ``{}`` slot for the
            page number (0, 1, 2, ...), e.g. ``"https://svc/users?page={}"`` (see
            ``connectors.http.listing``). Without it the source cannot be fully cached.
        list_key: the field of a listed item holding its key.
        list_items: dotted path of the items' array in a page (None: the page is one).

    Raises:
        ValueError: a setting is invalid; the message names it and its (redacted) value.
    """

    schema: Schema
    # Set in batch mode only (see the class docstring): instance attributes, so that
    # isinstance(source, ColumnarSource), which engine_for asks, says so.
    lookup_arrow: ArrowLookup
    fetch_arrow: ArrowLookup
    # Set with a list_url only, for the same reason (FullCache asks for them).
    store_key: Callable[[Any], Any]
    scan_dimension: Callable[[int], AsyncIterator[tuple[dict[Any, Any], int]]]

    def __init__(
        self,
        url_template: str,
        *,
        schema: SchemaLike,
        method: str = DEFAULT_METHOD,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | aiohttp.BasicAuth | None = None,
        batch_url: str | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        rate_limit: float | None = None,
        max_connections: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        path: str | None = None,
        fields: Mapping[str, str] | None = None,
        follow_redirects: RedirectPolicy = DEFAULT_FOLLOW_REDIRECTS,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        job_rate_limit: float | JobRateLimit | None = None,
        concurrency: str = DEFAULT_CONCURRENCY,
        list_url: str | None = None,
        list_key: str = "id",
        list_items: str | None = None,
    ) -> None:
        self.schema = Schema.of(schema)
        self._listing: tuple[UrlTemplate, str, body.Path] | None = None
        if list_url is not None:
            listing = UrlTemplate.parse(list_url, name="list_url")
            if listing.slots != 1:
                raise ValueError(
                    f"list_url needs one '{{}}' slot for the page number, got {listing.slots}"
                )
            if not isinstance(list_key, str) or not list_key:
                raise ValueError(f"list_key must be a field name, got {short(list_key)}")
            self._listing = (listing, list_key, body.parse_path(list_items, name="list_items"))
        self._settings = Settings.build(
            url_template,
            schema=self.schema,
            method=method,
            headers=headers,
            auth=auth,
            batch_url=batch_url,
            max_batch=max_batch,
            rate_limit=rate_limit,
            max_connections=max_connections,
            timeout=timeout,
            path=path,
            fields=fields,
            follow_redirects=follow_redirects,
            max_value_bytes=max_value_bytes,
            job_rate_limit=job_rate_limit,
            concurrency=concurrency,
        )
        self._init_derived()

    def _init_derived(self) -> None:
        # Everything a request needs that the settings fix, worked out once rather than
        # per request: what errors name, the field paths, the process's session.
        settings = self._settings
        self._key_target = f"{settings.method} {settings.template.redacted()}"
        self._fields = dict(settings.fields) if settings.fields else None
        self._pools: LoopLocal[Pool] = LoopLocal(
            _REGISTRY, settings, functools.partial(Pool.open, settings), Pool.is_open
        )
        self._batches: Batches | None = None
        if settings.batch is not None:
            target = f"POST {settings.batch.redacted()}"
            self._batches = Batches(settings, target, self.schema.loads, self._rows)
            self.lookup_arrow = self._lookup_arrow
            self.fetch_arrow = self._fetch_arrow
        if self._listing is not None:
            self.store_key = listing_store_key
            self.scan_dimension = self._scan_dimension

    def _scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[dict[Any, Any], int]]:
        """Every listed key with its answer, a page at a time (``page_rows`` is the
        server's page size, not ours to set)."""
        assert self._listing is not None
        return scan_pages(self, *self._listing)

    # -- the LookupSource protocol ------------------------------------------------------

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Look up distinct keys; see the class docstring for what each value can be.

        Raises:
            LookupFailed: batch mode only, when every batch POST of the call failed.
            DecodeError: batch mode only, when every batch answer was unreadable.
        """
        if not keys:
            return {}
        pool = self._pool()
        if self._batches is not None:
            return await self._batches.lookup_many(pool, keys)
        if len(keys) == 1:  # one record's call: no task and no gather for one request
            return {keys[0]: await self._lookup_one(pool, keys[0])}
        return await _gather_dict(keys, [self._lookup_one(pool, key) for key in keys])

    async def lookup_each(self, keys: Sequence[Any]) -> AsyncIterator[Mapping[Any, Any]]:
        """Look up distinct keys, handing each answer over as soon as it arrives: per-key
        mode yields every GET's answer as it completes (a key that hangs holds back no
        other key), batch mode each POST's answers.

        Raises:
            LookupFailed, DecodeError: batch mode only, as :meth:`lookup_many`, when every
                batch POST failed.
        """
        if not keys:
            return
        pool = self._pool()
        if self._batches is not None:
            async for found in self._batches.lookup_each(pool, keys):
                yield found
            return
        if len(keys) == 1:  # nothing to hand over early: no task for one request
            yield {keys[0]: await self._lookup_one(pool, keys[0])}
            return
        calls = {key: self._lookup_one(pool, key) for key in keys}
        async for found in answers_as_completed(calls):
            yield found

    def rate_limit_waits(self) -> tuple[int, float]:
        """With ``job_rate_limit``: this process's waits for its permits (how many, and
        their seconds) since the last call; joins add them to their metrics."""
        return take_waits(self._settings.job_rate_limit)

    def adaptive_limit(self) -> AdaptiveLimit | None:
        """With ``concurrency="auto"``: this process's adaptive limit, once a request
        made it; else None (joins copy its state into their metrics)."""
        return peek_process_limit(adaptive_key(self._settings))

    def concurrency_statistics(self) -> LimitStatistics | None:
        """With ``concurrency="auto"``: this process's adaptive limit (its limit, target
        latency and throttled requests so far), None before the first request or without."""
        limit = self.adaptive_limit()
        return None if limit is None else limit.statistics()

    async def aclose(self) -> None:
        """Close and forget this process's session for the running loop (reopens on use)."""
        forget_process_limit(adaptive_key(self._settings))
        if self._settings.job_rate_limit is not None:
            await close_limiter(self._settings.job_rate_limit)
        pool = self._pools.pop()
        if pool is not None:
            await pool.session.close()

    # -- the columnar lookup (batch mode) -----------------------------------------------

    async def _lookup_arrow(self, keys: Any, struct_type: Any) -> Any:
        """``lookup_arrow``: the batch POSTs, the answers decoded in bulk into
        ``struct_type`` (see ``connectors.http.arrow``)."""
        decode = await self._fetch_arrow(keys, struct_type)
        return decode()

    async def _fetch_arrow(self, keys: Any, struct_type: Any) -> Any:
        """``fetch_arrow``: the batch POSTs now, the bulk decode returned as a step the
        caller runs on its own thread (see ``connectors.http.arrow``)."""
        from .arrow import BatchDecoding, fetch_arrow  # pyarrow: needed on this path only

        batches = self._batches
        assert batches is not None, "only a batch-mode HttpLookup has fetch_arrow"
        decoding = BatchDecoding(batches, self._rows, self.schema, self._settings)
        return await fetch_arrow(decoding, self._pool(), keys, struct_type)

    # -- per-key mode -------------------------------------------------------------------

    async def _lookup_one(self, pool: Pool, key: Any) -> Any:
        settings = self._settings
        try:
            url = settings.template.expand(key)
        except KeyShapeError as exc:
            return LookupFailed(
                f"{self._key_target} for key {short(key)}: {exc}",
                key=key,
                kind="key",
                retryable=False,
            )
        try:
            payload = await send(
                pool, settings, settings.method, url, key=key, data=None, target=self._key_target
            )
        except LookupFailed as exc:
            _log.debug("lookup failed: %s", exc)
            return exc
        if payload is None:
            return None
        try:
            return self._rows(body.loads(payload, self.schema.loads))
        except DecodeError as exc:
            _log.debug("%s for key %s: %s", self._key_target, short(key), exc)
            return exc

    def _rows(self, document: Any) -> body.Rows:
        """The value of one key's document (the per-value decoder of both modes)."""
        return body.to_rows(document, self.schema, path=self._settings.path, fields=self._fields)

    # -- the process's session ----------------------------------------------------------

    def _pool(self) -> Pool:
        # An aiohttp session belongs to the loop it was created on. In production that is
        # the one runtime loop of the process, but tests (pytest-asyncio: a loop per test)
        # and drivers calling asyncio.run() use several, so each loop gets its own session.
        return self._pools.get()

    # -- value semantics --------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        # The description only: what _init_derived works out is rebuilt on arrival, and
        # a live session never travels.
        return {"schema": self.schema, "_settings": self._settings, "_listing": self._listing}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_derived()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HttpLookup)
            and other._settings == self._settings
            and other._listing == self._listing
        )

    def __hash__(self) -> int:
        return hash((self._settings, self._listing))

    def __repr__(self) -> str:
        return f"HttpLookup({self._settings.described()})"


async def _gather_dict(keys: Sequence[Any], calls: Sequence[Any]) -> dict[Any, Any]:
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        values = await asyncio.gather(*tasks)
    finally:
        for task in tasks:  # after a bug in one task or a cancellation: stop the others
            task.cancel()
    return dict(zip(keys, values, strict=True))
