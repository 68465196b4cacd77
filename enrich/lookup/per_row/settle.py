"""Settling a key's answer: cache it, retry it, or hand it to its chunks.

Answers come from the batcher's requests, key by key or a call's keys at once. A single
row for keys waited by one chunk each is the common case, and goes to the chunks in
bulk. Anything else is settled key by key: an answer that is not rows is the source's
error, a miss or an error may be retried (per key, for the chunks whose deadline the
retry starts before; when is the retry strategy's to say), the final outcome is cached,
and under ``on_error="fail"`` an error fails its chunks at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._errors import LookupFailed
from ...engine.clock import Clock
from ...engine.mailbox.hold import Hold
from ...engine.records.call_metrics import JoinMetrics
from ...engine.records.failure import Failed
from ..cache.lookup_cache import MISS
from ..join_settings import JoinSettings
from ..outcome import MISS_RESULT, as_rows
from .batcher import Batcher
from .delivery import Delivery
from .registry import Chunk, Registry


class Settler:
    """Settles the answers of a join's requests (see the module's docstring).

    Args:
        settings: the join's settings (its retry strategy and error policy).
        metrics: counts the retries.
        registry: the chunks waiting for each key.
        delivery: hands the outcomes to the chunks.
    """

    __slots__ = (
        "_clock",
        "_delivery",
        "_hold",
        "_metrics",
        "_on_error",
        "_registry",
        "_retry",
        "_store",
        "batcher",
    )

    batcher: Batcher  # set by the join once built: its requests call back here

    def __init__(
        self, settings: JoinSettings, metrics: JoinMetrics, registry: Registry, delivery: Delivery
    ) -> None:
        self._retry = settings.retry
        self._on_error = settings.on_error
        self._metrics = metrics
        self._registry = registry
        self._delivery = delivery
        self._clock: Clock | None = None
        self._store: Any = None
        self._hold: Hold | None = None

    def open(self, clock: Clock, store: Any, hold: Hold | None = None) -> None:
        """Start settling with ``clock``, the cache's ``store`` (or None) and the run's
        ``hold`` (the time it moves the chunks' deadlines on by, or None)."""
        self._clock = clock
        self._store = store
        self._hold = hold

    def answered(self, keys: list[Any], found: Mapping[Any, Any]) -> None:
        """Hand the answers of ``keys`` (absent from ``found``: a miss) to their rows."""
        delivery = self._delivery
        if self._retry is not None:
            for key in keys:
                self._settle(key, found.get(key))
            delivery.release_touched()
            self.batcher.schedule()  # retries due now, if any
            return
        # The common case, kept tight: no retries to consider.
        store = self._store
        if store is None and _all_single_rows(found):
            delivery.give_found(keys, found)
            delivery.release_touched()
            return
        clock = self._clock
        assert clock is not None
        get = found.get
        pop = self._registry.waiting.pop  # per key: the registry's map, read in place
        give = delivery.give
        now = clock.now()
        for key in keys:
            answer = get(key)
            if type(answer) is not tuple:
                self._settle(key, answer)
                continue
            if store is not None:
                store.put(key, answer, now)
            waiters = pop(key, None)
            for chunk in (waiters,) if type(waiters) is Chunk else waiters or ():
                give(chunk, key, answer)
        delivery.release_touched()

    def failed(self, keys: list[Any], error: Exception) -> None:
        """A request raised before answering ``keys``: each fails, or is retried."""
        for key in keys:
            self._answer(key, None, error)
        self._delivery.release_touched()
        self.batcher.schedule()  # retries due now, if any

    def _settle(self, key: Any, answer: Any) -> None:
        if isinstance(answer, BaseException):
            self._answer(key, None, answer)
            return
        try:
            rows = as_rows(answer)
        except TypeError as exc:  # the source broke its contract: asking again won't help
            error = LookupFailed(str(exc), key=key, kind="answer", retryable=False)
            self._answer(key, None, error)
        else:
            self._answer(key, rows, None)

    def _answer(self, key: Any, rows: Any, error: BaseException | None) -> None:
        """Settle ``key`` for every chunk waiting for it, or schedule its retry for the
        chunks whose deadline the retry starts before (the others keep this outcome)."""
        registry = self._registry
        live = registry.live(key)
        if not live:
            registry.forget(key)
            return
        staying = self._retry_for(key, rows, error, live)
        if staying:
            registry.keep(key, staying)
            live = [chunk for chunk in live if chunk not in staying]
            if not live:
                return
        else:
            registry.forget(key)
        store = self._store
        if error is not None:
            if store is not None and not staying:
                store.failed()
            outcome: Any = Failed(error)
        else:
            if store is not None and not staying:
                store.put(key, rows, self._clock.now())  # type: ignore[union-attr]
            outcome = rows
        delivery = self._delivery
        if error is not None and self._on_error == "fail":
            for chunk in live:
                if not chunk.done:
                    delivery.fail(chunk, error)
            return
        for chunk in live:
            delivery.give(chunk, key, outcome)

    def _retry_for(
        self, key: Any, rows: Any, error: BaseException | None, waiters: list[Chunk]
    ) -> list[Chunk]:
        """Schedule another call for ``key`` if the policy wants one; returns the chunks
        that wait for it (those whose deadline comes after the retry starts). When it
        starts, and whether that is in time for a chunk, are the strategy's to say."""
        retry = self._retry
        if retry is None:
            return []
        registry = self._registry
        attempt = registry.attempt(key)
        if attempt >= retry.max_attempts:
            return []
        if error is not None:
            again = retry.should_retry_exception(error)
        else:
            again = rows is MISS and retry.should_retry_result(MISS_RESULT)
        if not again:
            return []
        clock = self._clock
        assert clock is not None
        when = retry.retry_at(attempt, clock.now(), error)
        held = self._hold.held() if self._hold is not None else 0.0
        staying = [
            chunk
            for chunk in waiters
            if retry.starts_in_time(when, chunk.deadline + held - chunk.held_at)
        ]
        if not staying:
            return []  # it would start after every deadline: the last outcome stands
        self._metrics.retries += 1
        registry.schedule_retry(key, when, clock, self.batcher.again)
        return staying


def _all_single_rows(found: Mapping[Any, Any]) -> bool:
    """Whether every answer of a call is one row (misses are simply absent)."""
    kinds = set(map(type, found.values()))
    return not kinds or kinds == {tuple}
