"""The lookup join's request batcher: pending keys -> requests of at most ``max_batch``.

Keys wait in one pending list. As soon as it holds ``max_batch`` keys they go out; a
shorter list goes out at the end of the loop iteration in which its first key arrived,
so that keys admitted together (several chunks, a round of retries) share requests.
Each request is one task on the join's loop, calling the source's ``lookup_each`` (its
answers are handed back part by part, as they arrive) or else ``lookup_many``. Answers
and errors go back to the join through two callbacks, on the loop thread.

With a timeout, each request has its own deadline, which starts with the request and
moves on while the request waits for a connection, a permit or a load (its own
:class:`~enrich.engine.mailbox.hold.Hold`, whose waits mark the run's hold too): a
request still out at its deadline is cancelled and its unanswered keys time out
(:class:`~enrich.LookupTimeout`), so a request the store never answers cannot keep the
requests queued behind it waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from ..._errors import LookupTimeout
from ...engine.clock import Clock
from ...engine.mailbox.hold import Hold, set_hold
from ...engine.mailbox.within import call_within
from ...engine.records.call_metrics import JoinMetrics
from ..contract.lookup_source import LookupSource, hands_over_each
from .registry import Registry

Answered = Callable[[list[Any], Mapping[Any, Any]], None]
Failed = Callable[[list[Any], Exception], None]


class Batcher:
    """Sends pending keys to the source in requests of at most ``max_batch`` keys.

    Args:
        source: the dimension store.
        max_batch: keys per request at most.
        metrics: counts requests, keys requested and each request's latency.
        registry: counts the calls made for each key, when ``counts_attempts``.
        counts_attempts: whether calls are counted (only retries need them).
        answered: ``answered(keys, found)`` hands over the answers of ``keys``; a key
            absent from ``found`` is a miss. Called once or more per request, never
            twice for a key.
        failed: ``failed(keys, error)``: the request raised before answering ``keys``.
    """

    __slots__ = (
        "_answered",
        "_clock",
        "_counts",
        "_failed",
        "_hold",
        "_loop",
        "_metrics",
        "_registry",
        "_requests",
        "_scheduled",
        "_source",
        "_timeout",
        "max_batch",
        "pending",
    )

    def __init__(
        self,
        source: LookupSource,
        max_batch: int,
        metrics: JoinMetrics,
        registry: Registry,
        *,
        counts_attempts: bool,
        answered: Answered,
        failed: Failed,
    ) -> None:
        self._source = source
        self.max_batch = max_batch
        self._metrics = metrics
        self._registry = registry
        self._counts = counts_attempts
        self._answered = answered
        self._failed = failed
        # Keys to request. The join's admission extends it directly, in bulk, and then
        # calls schedule() once per round of chunks.
        self.pending: list[Any] = []
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clock: Clock | None = None
        self._hold: Hold | None = None
        self._timeout: float | None = None
        self._requests: set[asyncio.Task[None]] = set()

    def open(
        self,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        hold: Hold | None = None,
        timeout: float | None = None,
    ) -> None:
        """Send requests on ``loop``; their waits for a connection, a permit or a load
        mark ``hold``; each request has ``timeout`` seconds at the store (None: no
        limit)."""
        self._loop = loop
        self._clock = clock
        self._hold = hold
        self._timeout = timeout

    def close(self) -> None:
        """Cancel the requests in flight and drop the pending keys."""
        for request in self._requests:
            request.cancel()
        self._requests.clear()
        self.pending.clear()

    def again(self, key: Any) -> None:
        """Request ``key`` once more (its retry is due)."""
        self.pending.append(key)
        self.schedule()

    def schedule(self) -> None:
        """Send the pending keys: now if they fill a request, else soon."""
        if len(self.pending) >= self.max_batch:
            self._flush()
        elif self.pending and not self._scheduled:
            # Let keys admitted in the same loop iteration share the request.
            self._scheduled = True
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]

    def _flush(self) -> None:
        self._scheduled = False
        keys, self.pending = self.pending, []
        size = self.max_batch
        loop = self._loop
        assert loop is not None
        for start in range(0, len(keys), size):
            request = loop.create_task(self._request(keys[start : start + size]))
            self._requests.add(request)
            request.add_done_callback(self._requests.discard)

    async def _request(self, keys: list[Any]) -> None:
        metrics = self._metrics
        clock = self._clock
        assert clock is not None
        metrics.requests += 1
        metrics.keys_requested += len(keys)
        if self._counts:
            self._registry.count_attempts(keys)
        left = dict.fromkeys(keys)  # the keys not handed over yet
        if self._timeout is None:
            if self._hold is not None:
                set_hold(self._hold)  # this task's own context: whatever scheduled it
            await self._ask(keys, left)
            return
        # The request's own hold and deadline; its waits mark the run's hold too.
        started = clock.now()
        timed = await call_within(lambda: self._ask(keys, left), self._timeout, clock, self._hold)
        if timed.late and left:  # the store did not answer them in time
            metrics.latency.record(clock.now() - started)
            attempt, timeout = self._registry.attempt, self._timeout
            late_keys = list(left)
            left.clear()
            self._answered(late_keys, {k: LookupTimeout(k, timeout, attempt(k)) for k in late_keys})

    async def _ask(self, keys: list[Any], left: dict[Any, None]) -> None:
        """Ask the source for ``keys`` and hand its answers over; ``left`` loses each key
        handed over."""
        clock = self._clock
        assert clock is not None
        started = clock.now()
        if hands_over_each(self._source):
            await self._request_each(keys, started, left)
            return
        try:
            found = await self._source.lookup_many(keys)
        except Exception as exc:
            self._metrics.latency.record(clock.now() - started)
            left.clear()
            self._failed(keys, exc)
            return
        self._metrics.latency.record(clock.now() - started)
        left.clear()
        self._answered(keys, found)

    async def _request_each(self, keys: list[Any], started: float, left: dict[Any, None]) -> None:
        """Hand over the answers of a source's ``lookup_each`` as they arrive; keys never
        answered are misses, and keys not answered when it raises fail with the error."""
        error: Exception | None = None
        try:
            answers = self._source.lookup_each(keys)  # type: ignore[attr-defined]
            async with contextlib.aclosing(answers):
                async for found in answers:
                    part = [key for key in found if key in left]
                    for key in part:
                        del left[key]
                    if len(part) != len(found):  # keys answered twice, or never asked
                        found = {key: found[key] for key in part}
                    if part:
                        self._answered(part, found)
        except Exception as exc:
            error = exc
        clock = self._clock
        assert clock is not None
        self._metrics.latency.record(clock.now() - started)
        if not left:
            return
        rest = list(left)
        left.clear()
        if error is None:
            self._answered(rest, {})
        else:
            self._failed(rest, error)
