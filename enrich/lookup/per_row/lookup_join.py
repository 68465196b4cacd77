"""The lookup join: Flink's async lookup join, batched and coalesced, with error policies.

Semantics are per row, execution is per chunk. The operator admits *chunks* of rows
(a slice of an Arrow batch, a list of dicts); :class:`LookupJoin` answers what it can
from the cache, coalesces rows whose key is already pending or in flight (in any chunk),
and sends the remaining distinct keys to the source in ``lookup_many`` calls of at most
``max_batch`` keys. Each row gets its own outcome: its rows, a miss, or an error that the
``on_error`` policy turns into a null row, no row, a row with the reason, or a failure.

Answers reach their rows key by key, as the source hands them over (``lookup_each``,
else when ``lookup_many`` returns). Retries are per key, with the engine's retry
strategies; each row keeps its own deadline (rows answered in time keep their answer,
and a row that times out leaves the shared request). Under UNORDERED, the rows of a
chunk that are answered leave at once, and free their capacity, without waiting for
their chunk-mates.

The join glues its parts: :mod:`~enrich.lookup.per_row.registry` (which chunks wait for which
key, calls made, pending retries), :mod:`~enrich.lookup.per_row.batcher` (pending keys into
requests), :mod:`~enrich.lookup.per_row.settle` (each answer cached, retried or handed on under
the error policy), :mod:`~enrich.lookup.per_row.delivery` (answers into chunks, rows out); the
admission of chunks is its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ...engine.clock import Clock, LoopClock
from ...engine.function import AsyncFunction, ResultFuture
from ...engine.mailbox.hold import Hold, current_hold
from ...engine.records.call_metrics import JoinMetrics, record_concurrency
from ...engine.records.failure import Failed
from ...engine.retry import RetryStrategy
from ..cache.full import FullCache
from ..cache.lookup_cache import CacheStatistics, LookupCache, cache_scope
from ..contract.lookup_source import LookupSource
from ..full_view import full_cache_view
from ..join_settings import DEFAULT_MAX_BATCH, JoinSettings
from ..key_rule import BadKey, admit_keys
from ..outcome import NULL_KEY
from .batcher import Batcher
from .delivery import Delivery
from .registry import Chunk, Registry
from .settle import Settler


class LookupJoin(AsyncFunction):
    """Joins chunks of keys with the rows a :class:`~enrich.LookupSource` holds for them.

    Each record the operator gives it is a chunk ``(tag, keys)``: ``keys[i]`` is the key
    of row ``i`` (a scalar, a tuple for a composite key, or None, which joins nothing).
    A key part is a ``str``, an ``int`` (not a ``bool``) or ``bytes``; a row whose key is
    anything else fails alone, under ``on_error`` (see :mod:`enrich.lookup.key_rule`).
    It completes each chunk with one :class:`JoinedChunk`. Use :func:`lookup_rows` or
    ``enrich.spark.lookup_join`` rather than driving it by hand.

    Args:
        source: the dimension store.
        how: "left" keeps rows whose key is missing (null fields); "inner" drops them.
        on_error: what a row's error becomes: "fail" (raise, ending the run), "null"
            (a row with null fields), "drop" (no row), or "error_column" (a row with
            null fields and the reason).
        cache: a :class:`~enrich.LookupCache`, shared by every join of the process that
            uses the same cache and source; or a :class:`~enrich.FullCache`: the source
            is then asked nothing per key, the process's snapshot answers.
        retry: per-key retries (on errors the error calls retryable, and on misses with
            ``retry_on_result``); a retry is made for the rows whose deadline it starts
            before (for the others the last outcome stands), never reads the cache.
        timeout: seconds a chunk's rows have, from admission to answer (give the
            operator the same timeout: its timer calls :meth:`timeout`), not counting
            the time the run's requests waited for a connection, a permit or a load
            (the operator's :class:`~enrich.engine.mailbox.hold.Hold`: while any of
            them waits, every chunk's deadline moves on; each connector bounds its own
            requests, so a store that hangs still ends them). A row that times out
            leaves the request its key shares with other chunks' rows.
        max_batch: keys per ``lookup_many`` call at most.
        clock: the time source (default: the running loop's).

    The settings are checked once, into a :class:`~enrich.lookup.join_settings.JoinSettings`
    (a bad one raises ``ValueError`` naming it and its value); entry points that built
    one already use :meth:`from_settings`.

    No row is lost: each yields its outputs, is dropped by an inner join's miss or the
    "drop" policy, or fails the run ("fail"); the metrics count every one.
    """

    def __init__(
        self,
        source: LookupSource,
        *,
        how: str = "left",
        on_error: str = "fail",
        cache: LookupCache | FullCache | None = None,
        retry: RetryStrategy | None = None,
        timeout: float | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        clock: Clock | None = None,
    ) -> None:
        settings = JoinSettings(
            how=how,
            on_error=on_error,
            cache=cache,
            retry=retry,
            timeout=timeout,
            max_batch=max_batch,
        )
        self._setup(source, settings, clock)

    @classmethod
    def from_settings(
        cls, source: LookupSource, settings: JoinSettings, *, clock: Clock | None = None
    ) -> LookupJoin:
        """A join with settings already built (and validated) by an entry point."""
        join = cls.__new__(cls)
        join._setup(source, settings, clock)
        return join

    def _setup(self, source: LookupSource, settings: JoinSettings, clock: Clock | None) -> None:
        # A join built by hand (an engine's comes with its full cache in place already).
        source, settings = full_cache_view(source, settings, clock)
        self.settings = settings
        self.source = source
        self.how = settings.how
        self.on_error = settings.on_error
        self.cache = settings.cache
        self.retry = settings.retry
        self.max_batch = settings.max_batch
        self.metrics = JoinMetrics()
        self._timeout = settings.timeout
        self._clock = clock
        self._hold: Hold | None = None
        self._store: Any = None
        self._registry = Registry()
        self._delivery = Delivery(
            settings.how, settings.on_error, self.metrics, self._registry, repr(source)
        )
        self._settler = Settler(settings, self.metrics, self._registry, self._delivery)
        self._batcher = self._settler.batcher = Batcher(
            source,
            settings.max_batch,
            self.metrics,
            self._registry,
            counts_attempts=settings.retry is not None,  # only retries read the counts
            answered=self._settler.answered,
            failed=self._settler.failed,
        )

    def __repr__(self) -> str:
        return f"LookupJoin({self.source!r}, how={self.how!r}, on_error={self.on_error!r})"

    # -- lifecycle ---------------------------------------------------------------------

    def open(self) -> None:
        loop = asyncio.get_running_loop()
        if self._clock is None:
            self._clock = LoopClock(loop)
        # The operator's run's hold (None when driven otherwise): the time a rate limit
        # holds the requests back moves the chunks' deadlines on.
        self._hold = current_hold()
        self._batcher.open(loop, self._clock, self._hold, self._timeout)
        if isinstance(self.cache, LookupCache):
            self._store = self.cache.storage(cache_scope(self.source))
        self._settler.open(self._clock, self._store, self._hold)

    def close(self) -> None:
        self._batcher.close()
        self._registry.clear()
        self._delivery.clear()

    def cache_statistics(self) -> CacheStatistics | None:
        """This process's statistics of the join's cache (None without a cache)."""
        return self._store.statistics() if self._store is not None else None

    def statistics(self) -> JoinMetrics:
        """This join's metrics so far (a copy), with the store's adaptive limit if any."""
        record_concurrency(self.metrics, self.source)
        copy = JoinMetrics()
        copy.merge(self.metrics)
        return copy

    # -- chunks in -----------------------------------------------------------------------

    def async_invoke_many(self, values: Sequence[Any], results: Sequence[ResultFuture]) -> None:
        clock = self._clock
        assert clock is not None, "open() was not called"
        now = clock.now()
        deadline = now + self._timeout if self._timeout is not None else float("inf")
        held_at = self._hold.held() if self._hold is not None else 0.0
        metrics = self.metrics
        store = self._store
        registry = self._registry
        delivery = self._delivery
        chunks = delivery.chunks
        # Kept inlined: this loop runs per key, so it reads and fills the registry's map
        # and the batcher's pending list in place rather than through a call per key.
        waiting = registry.waiting
        pending = self._batcher.pending
        for value, result in zip(values, results, strict=True):
            tag, keys = value
            chunk = Chunk(id(value), tag, keys, result, deadline)
            chunk.held_at = held_at
            chunks[chunk.ident] = chunk
            answers = chunk.answers
            metrics.rows_in += len(keys)
            admitted = admit_keys(keys, self.settings.on)
            if admitted is not keys:  # a key breaks the key rule: its row fails alone
                chunk.keys = keys = _stand_in_bad_keys(chunk, admitted)
            distinct = dict.fromkeys(keys)
            shared = len(keys) - len(distinct)  # rows repeating a key of this chunk
            if None in distinct:
                del distinct[None]
                answers[None] = NULL_KEY
                chunk.simple = False
                shared -= keys.count(None) - 1
            if store is None and not answers:
                # The common case, in bulk: register the chunk for every key nobody
                # waits for yet, and join the few keys already pending elsewhere.
                joined = registry.wait_all(chunk, distinct)
                pending.extend(distinct)
                chunk.remaining += joined + len(distinct)
                metrics.coalesced += shared + joined
                if chunk.remaining == 0:
                    delivery.finish(chunk)
                continue
            for key in distinct:
                if key in answers:  # a stand-in for a bad key, already failed
                    continue
                waiters = waiting.get(key)
                if waiters is not None:
                    registry.join(key, waiters, chunk)
                    chunk.remaining += 1
                    shared += 1
                    continue
                if store is not None:
                    cached = store.get(key, now)
                    if cached is not None:
                        metrics.cache_hits += 1
                        answers[key] = cached
                        if type(cached) is not tuple:
                            chunk.simple = False
                        continue
                    metrics.cache_misses += 1
                waiting[key] = chunk
                chunk.remaining += 1
                pending.append(key)
            metrics.coalesced += shared
            if chunk.remaining == 0:
                delivery.finish(chunk)
            elif chunk.releases and answers:
                delivery.release(chunk)  # cached rows and null keys leave at once
        self._batcher.schedule()

    def timeout(self, value: Any, result: ResultFuture) -> None:
        """The chunk's deadline passed: its unanswered keys time out, row by row."""
        chunk = self._delivery.chunks.get(id(value))
        if chunk is None:  # pragma: no cover - finished in the same instant
            return
        timeout = self._timeout if self._timeout is not None else float("nan")
        self._delivery.time_out(chunk, result, timeout)


def _stand_in_bad_keys(chunk: Chunk, keys: list[Any]) -> list[Any]:
    """Fail the rows whose key broke the rule (each :class:`BadKey` is its own key)."""
    for key in keys:
        if type(key) is BadKey:
            chunk.answers[key] = Failed(key.error)
            chunk.simple = False
    return keys
