"""The lookup join: Flink's async lookup join, batched and coalesced, with error policies.

:class:`LookupJoin` is an :class:`~enrich.AsyncFunction` over records. It takes the
records the operator admits together, answers what it can from the cache, coalesces
records whose key is already pending or in flight, and sends the remaining distinct keys
to the source in ``lookup_many`` calls of at most ``max_batch`` keys. Each record keeps
the operator's per-record timeout and retries; its final error goes to the ``on_error``
policy instead of failing the job (unless the policy is "fail").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._cache import MISS, CacheStatistics, LookupCache
from ._clock import Clock, LoopClock
from ._errors import DecodeError, LookupTimeout
from ._function import AsyncFunction, ResultFuture
from ._metrics import JoinMetrics
from ._model import OutputMode
from ._retry import RetryStrategy
from ._source import LookupSource
from ._wait import DEFAULT_CAPACITY, DEFAULT_TIMEOUT, AsyncWaitIterator

log = logging.getLogger("enrich.lookup")

HOWS = ("left", "inner")
ON_ERROR = ("fail", "null", "drop", "error_column")
DEFAULT_MAX_BATCH = 500
# Error rows logged per join before going quiet (the metrics keep counting).
_LOGGED_ERRORS = 5

Combine = Callable[[Any, "tuple[Any, ...] | None", "str | None"], Any]


class MissResult(list):  # type: ignore[type-arg]
    """The outputs of a record whose key was not found (a left join's null row, or
    nothing for an inner join); ``enrich.retry_on_empty`` retries these."""

    is_miss = True


def _triple(value: Any, row: tuple[Any, ...] | None, error: str | None) -> Any:
    return (value, row, error)


def error_kind(error: BaseException) -> str:
    """A short reason for metrics and error columns: "timeout", "status:503", ..."""
    if isinstance(error, LookupTimeout):
        return "timeout"
    kind = getattr(error, "kind", None)
    return kind if isinstance(kind, str) else type(error).__name__


class LookupJoin(AsyncFunction):
    """Joins each record with the rows its key finds in a :class:`~enrich.LookupSource`.

    Args:
        source: the dimension store.
        key: the record's key (a scalar, or a tuple for composite keys); None joins
            nothing (a left join keeps the record with null fields).
        how: "left" keeps records whose key is missing; "inner" drops them.
        on_error: what a record's error becomes: "fail" (raise, ending the run), "null"
            (a left row with null fields), "drop" (no row), or "error_column" (a row with
            null fields and the reason).
        cache: a :class:`~enrich.LookupCache`, shared by every join of the process that
            uses the same cache and source.
        max_batch: keys per ``lookup_many`` call at most.
        combine: builds an output from ``(record, row or None, reason or None)``; the
            default yields that triple.
        clock: the time source for cache TTLs and latencies (default: the loop's).

    A record yields one output per row its key finds (none found: a left join's single
    null row, or nothing). Records are never lost: each one yields its outputs, is
    dropped by an inner join's miss or the "drop" policy, or fails the run ("fail").
    """

    def __init__(
        self,
        source: LookupSource,
        *,
        key: Callable[[Any], Any],
        how: str = "left",
        on_error: str = "fail",
        cache: LookupCache | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        combine: Combine | None = None,
        clock: Clock | None = None,
    ) -> None:
        if how not in HOWS:
            raise ValueError(f"how must be one of {HOWS}, got {how!r}")
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be an int >= 1, got {max_batch!r}")
        if cache is not None and not isinstance(cache, LookupCache):
            raise ValueError(f"cache must be a LookupCache or None, got {cache!r}")
        self.source = source
        self.how = how
        self.on_error = on_error
        self.cache = cache
        self.max_batch = max_batch
        self.metrics = JoinMetrics()
        self._key = key
        self._combine = combine or _triple
        self._clock = clock
        self._store: Any = None
        self._waiting: dict[Any, list[tuple[Any, ResultFuture]]] = {}
        self._pending: list[Any] = []
        self._flush_scheduled = False
        self._requests: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"LookupJoin({self.source!r}, how={self.how!r}, on_error={self.on_error!r})"

    # -- lifecycle ---------------------------------------------------------------------

    def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._clock is None:
            self._clock = LoopClock(self._loop)
        if self.cache is not None:
            self._store = self.cache.storage(_scope(self.source))

    def close(self) -> None:
        for request in self._requests:
            request.cancel()
        self._requests.clear()
        self._waiting.clear()
        self._pending.clear()

    # -- records in ----------------------------------------------------------------------

    def async_invoke_many(self, values: Sequence[Any], results: Sequence[ResultFuture]) -> None:
        metrics = self.metrics
        store = self._store
        waiting = self._waiting
        key_of = self._key
        now = self._clock.now() if store is not None else 0.0  # type: ignore[union-attr]
        for value, result in zip(values, results, strict=True):
            if result.attempt == 1:
                metrics.rows_in += 1
            try:
                key = key_of(value)
                hash(key)
            except Exception as exc:
                result.complete_exceptionally(
                    DecodeError(
                        f"cannot read the lookup key of record {value!r}: {exc}", value=value
                    )
                )
                continue
            if key is None:
                self._answer(value, result, MISS, count_miss=False)
                continue
            waiters = waiting.get(key)
            if waiters is not None:
                waiters.append((value, result))
                metrics.coalesced += 1
                continue
            if store is not None:
                # A retry (attempt > 1) was made because of a miss or an error: only a
                # fresh answer from the store will do, never a cached miss.
                cached = store.get(key, now, accept_miss=result.attempt <= 1)
                if cached is not None:
                    metrics.cache_hits += 1
                    self._answer(value, result, cached)
                    continue
                metrics.cache_misses += 1
            waiting[key] = [(value, result)]
            self._pending.append(key)
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif self._pending and not self._flush_scheduled:
            # Let records admitted in the same loop iteration join this batch.
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]

    def _flush(self) -> None:
        self._flush_scheduled = False
        keys, self._pending = self._pending, []
        size = self.max_batch
        for start in range(0, len(keys), size):
            request = self._loop.create_task(self._fetch(keys[start : start + size]))  # type: ignore[union-attr]
            self._requests.add(request)
            request.add_done_callback(self._requests.discard)

    async def _fetch(self, keys: list[Any]) -> None:
        metrics = self.metrics
        clock = self._clock
        assert clock is not None
        metrics.requests += 1
        metrics.keys_requested += len(keys)
        started = clock.now()
        try:
            found = await self.source.lookup_many(keys)
        except Exception as exc:
            metrics.latency.record(clock.now() - started)
            for key in keys:
                self._fail_key(key, exc)
            return
        now = clock.now()
        metrics.latency.record(now - started)
        store = self._store
        for key in keys:
            answer = found.get(key)
            if isinstance(answer, BaseException):
                self._fail_key(key, answer)
                continue
            rows = _rows(answer)
            if store is not None:
                store.put(key, rows, now)
            for value, result in self._waiting.pop(key, ()):
                self._answer(value, result, rows)

    def _fail_key(self, key: Any, error: BaseException) -> None:
        if self._store is not None:
            self._store.failed()
        for _, result in self._waiting.pop(key, ()):
            result.complete_exceptionally(error)

    # -- records out ---------------------------------------------------------------------

    def _answer(
        self, value: Any, result: ResultFuture, rows: Any, *, count_miss: bool = True
    ) -> None:
        try:
            outputs = self._outputs(value, rows, count_miss=count_miss)
        except Exception as exc:  # a combine() that refuses the row: that record's error
            result.complete_exceptionally(exc)
        else:
            result.complete(outputs)

    def _outputs(self, value: Any, rows: Any, *, count_miss: bool = True) -> list[Any]:
        combine = self._combine
        if rows is MISS:
            if count_miss:
                self.metrics.misses += 1
            out: list[Any] = MissResult()
            if self.how == "left":
                out.append(combine(value, None, None))
        elif type(rows) is tuple:
            out = [combine(value, rows, None)]
        else:
            out = [combine(value, row, None) for row in rows]
        self.metrics.rows_out += len(out)
        return out

    def handle_error(self, value: Any, error: BaseException) -> Iterable[Any]:
        kind = error_kind(error)
        self.metrics.errors[kind] += 1
        policy = self.on_error
        if policy == "fail":
            raise error
        if sum(self.metrics.errors.values()) <= _LOGGED_ERRORS:
            log.warning("lookup failed for a record (%s, policy %s): %s", kind, policy, error)
        if policy == "drop":
            return []
        reason = f"{kind}: {error}" if policy == "error_column" else None
        self.metrics.rows_out += 1
        return [self._combine(value, None, reason)]

    def cache_statistics(self) -> CacheStatistics | None:
        """This process's statistics of the join's cache (None without a cache)."""
        return self._store.statistics() if self._store is not None else None

    def statistics(self) -> JoinMetrics:
        """This join's metrics so far (a copy)."""
        copy = JoinMetrics()
        copy.merge(self.metrics)
        return copy


def _rows(answer: Any) -> Any:
    """A source's answer for one key as cacheable rows: a tuple, a list, or MISS."""
    if answer is None:
        return MISS
    if isinstance(answer, tuple):
        return answer
    if isinstance(answer, list):
        return answer if answer else MISS
    raise TypeError(f"a lookup source answered {answer!r}: expected a tuple, a list or None")


def _scope(source: LookupSource) -> Any:
    """What tells one source from another for a shared cache: its settings."""
    try:
        hash(source)
        return (type(source).__qualname__, source)
    except TypeError:
        return (type(source).__qualname__, repr(source))


def lookup_rows(
    rows: Iterable[dict[str, Any]],
    source: LookupSource,
    *,
    on: str | Sequence[str],
    how: str = "left",
    on_error: str = "fail",
    cache: LookupCache | None = None,
    mode: OutputMode | str = OutputMode.ORDERED,
    capacity: int = DEFAULT_CAPACITY,
    timeout: float | None = DEFAULT_TIMEOUT,
    retry: RetryStrategy | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    prefix: str = "",
    error_column: str = "enrich_error",
    clock: Clock | None = None,
) -> AsyncWaitIterator:
    """Enrich dict rows with the fields their key finds in ``source``.

    Each output row is the input row plus the schema's fields (named ``prefix + name``;
    None where nothing was found), plus ``error_column`` with the reason when
    ``on_error="error_column"``. Field names that collide with the input's raise
    ``ValueError`` naming them.
    """
    columns = [prefix + name for name in source.schema.names]
    width = len(columns)
    with_error = on_error == "error_column"
    on_fields = (on,) if isinstance(on, str) else tuple(on)
    if not on_fields:
        raise ValueError("on must name at least one field")
    checked: list[bool] = []

    def key(row: dict[str, Any]) -> Any:
        try:
            if len(on_fields) == 1:
                return row[on_fields[0]]
            parts = tuple(row[f] for f in on_fields)
        except KeyError as exc:
            raise KeyError(f"record has no field {exc.args[0]!r} (on={on!r})") from None
        return None if any(p is None for p in parts) else parts

    def combine(row: dict[str, Any], found: tuple[Any, ...] | None, error: str | None) -> Any:
        if not checked:
            clash = sorted(set(columns) & set(row))
            if clash:
                raise ValueError(
                    f"dimension fields {clash} collide with the record's fields; "
                    f"set prefix= to rename them"
                )
            checked.append(True)
        out = dict(row)
        out.update(zip(columns, found if found is not None else (None,) * width, strict=True))
        if with_error:
            out[error_column] = error
        return out

    join = LookupJoin(
        source,
        key=key,
        how=how,
        on_error=on_error,
        cache=cache,
        max_batch=max_batch,
        combine=combine,
        clock=clock,
    )
    wait_mode = OutputMode.of(mode)
    return AsyncWaitIterator(
        rows, join, mode=wait_mode, timeout=timeout, capacity=capacity, retry=retry, clock=clock
    )
