"""Test doubles shipped for users' tests too: a fake clock and scriptable functions.

Example::

    clock = FakeClock()
    slow = FakeFunction(clock=clock, latency={"b": 5.0})
    results = ordered_wait_async(["a", "b"], slow, timeout=1.0, clock=clock)
    ...
    clock.advance(1.0)   # "b" times out, exactly at t=1.0
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from ._errors import LookupFailed
from .engine.function import AsyncFunction, ResultFuture
from .engine.mailbox.hold import held_back
from .engine.records.record_schema import Schema
from .engine.runtime import in_loop_thread


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told to, for exact tests of time.

    Timers run on the loop that scheduled them, in time order, when :meth:`advance`
    passes their time; ``now()`` reads exactly the time of the timer being run.
    ``advance`` may be called from the loop or from any other thread (it then waits
    until the callbacks ran on the loop).
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], object]) -> _FakeTimer:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        timer = _FakeTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    async def sleep(self, delay: float) -> None:
        future = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        timer = self.call_at(self._now + delay, wake)
        try:
            await future
        finally:
            timer.cancel()  # a cancelled sleeper leaves no timer behind

    def pending_timers(self) -> int:
        """How many timers are scheduled and not cancelled."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def next_deadline(self) -> float | None:
        live = [when for when, _, t in self._timers if not t.cancelled]
        return min(live) if live else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, running every timer that falls due."""
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        loop = self._loop
        if loop is None or in_loop_thread(loop) or not loop.is_running():
            self._advance(seconds)
            return
        done: Future[None] = Future()

        def run() -> None:
            try:
                self._advance(seconds)
                done.set_result(None)
            except BaseException as exc:  # pragma: no cover - surfaced to the caller
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        done.result(timeout=30)

    def _advance(self, seconds: float) -> None:
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.callback()
        self._now = target


async def settle(rounds: int = 50) -> None:
    """Let the running loop run everything that is ready (callbacks, woken tasks)."""
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)  # asyncio's run queue; uvloop has none
    for _ in range(rounds):
        await asyncio.sleep(0)
        if ready is not None and not ready:
            # Nothing else runnable: one more turn lets callbacks scheduled by the last
            # step run too.
            await asyncio.sleep(0)
            if not ready:
                return


async def drive(clock: FakeClock, awaitable: Any, *, limit: float = 1e6) -> Any:
    """Await ``awaitable`` while jumping ``clock`` to the next timer whenever the loop is
    idle (trio's "autojump"). Raises ``RuntimeError`` if nothing is left to wake it."""
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            await settle()
            if task.done():
                return task.result()
            deadline = clock.next_deadline()
            if deadline is None:
                raise RuntimeError("drive(): the awaitable waits, but no timer is left")
            if deadline > limit:
                raise RuntimeError(f"drive(): next timer at {deadline} is past {limit}")
            clock.advance(max(deadline - clock.now(), 0.0))
    finally:
        if not task.done():
            task.cancel()


class FakeFunction(AsyncFunction):
    """A scriptable coroutine-style function.

    Args:
        fn: the result for a value (default: ``[value]``).
        clock: the clock whose ``sleep`` makes latency (a FakeClock keeps tests exact).
        latency: seconds per call: a number, a mapping value -> seconds, or a callable.
        fail: value -> how many calls fail before one succeeds.
        never: values whose calls never answer.
        error: the exception (or a callable value -> exception) a failing call raises.

    It records ``calls`` (every value it was called with, retries included) and the
    ``max_concurrency`` it saw.
    """

    def __init__(
        self,
        fn: Callable[[Any], Iterable[Any]] = lambda value: [value],
        *,
        clock: Any = None,
        latency: float | Mapping[Any, float] | Callable[[Any], float] = 0.0,
        fail: Mapping[Any, int] | None = None,
        never: Iterable[Any] = (),
        error: BaseException | Callable[[Any], BaseException] | None = None,
    ) -> None:
        self._fn = fn
        self._clock = clock
        self._latency = latency
        self._fail = dict(fail or {})
        self._never = set(never)
        self._error = error
        self.calls: list[Any] = []
        self.in_flight = 0
        self.max_concurrency = 0
        self.opened = 0
        self.closed = 0

    def open(self) -> None:
        self.opened += 1

    def close(self) -> None:
        self.closed += 1

    def latency_of(self, value: Any) -> float:
        latency = self._latency
        if callable(latency):
            return float(latency(value))
        if isinstance(latency, Mapping):
            return float(latency.get(value, 0.0))
        return float(latency)

    async def invoke(self, value: Any) -> Iterable[Any]:
        self.calls.append(value)
        self.in_flight += 1
        self.max_concurrency = max(self.max_concurrency, self.in_flight)
        try:
            if value in self._never:
                await asyncio.get_running_loop().create_future()
            delay = self.latency_of(value)
            if delay > 0:
                await (self._clock.sleep(delay) if self._clock else asyncio.sleep(delay))
            if self._fail.get(value, 0) > 0:
                self._fail[value] -= 1
                error = self._error
                if callable(error) and not isinstance(error, BaseException):
                    raise error(value)
                raise (
                    error if error is not None else RuntimeError(f"scripted failure for {value!r}")
                )
            return self._fn(value)
        finally:
            self.in_flight -= 1


class FakeSource:
    """A scriptable dimension store implementing :class:`~enrich.LookupSource`.

    Args:
        data: key -> a row tuple, a list of row tuples (1:N), None (a stored miss) or an
            exception instance (that key fails on its own).
        schema: the dimension schema (default: one string field "value").
        clock: makes latency (a FakeClock keeps tests exact).
        latency: seconds per call: a number, or a callable of the keys of the call.
        key_latency: key -> seconds that key takes instead (from the call's start).
        fail_calls: how many calls fail as a whole before calls succeed.
        fail_keys: key -> how many calls fail that key alone before it succeeds.
        never: keys that are never answered.
        error: what failing calls raise (default: a retryable ``LookupFailed``).
        permit_wait: seconds each call first waits for a rate limit's permit, as a
            source with a job rate limit does: marked as held back
            (:mod:`enrich.engine.mailbox.hold`), so a join's timeout does not count it.
        connections: at most this many calls at the store at once (None: no bound); a
            call first waits for a free connection, as a pooled connector's does, and
            marks that wait held back too. A call that never answers keeps its
            connection.

    It hands answers over as they arrive (``lookup_each``): the keys of a call are
    answered at their own times, and a key in ``never`` holds back no other key.
    ``lookup_many`` answers when the whole call is done (so a ``never`` key makes the
    whole call hang), as a source without ``lookup_each`` does.

    ``requests`` records the keys of every call; ``closed`` counts ``aclose()`` calls.
    """

    def __init__(
        self,
        data: Mapping[Any, Any] | None = None,
        *,
        schema: Any = "value string",
        clock: Any = None,
        latency: float | Callable[[list[Any]], float] = 0.0,
        key_latency: Mapping[Any, float] | None = None,
        fail_calls: int = 0,
        fail_keys: Mapping[Any, int] | None = None,
        never: Iterable[Any] = (),
        error: BaseException | None = None,
        permit_wait: float = 0.0,
        connections: int | None = None,
    ) -> None:
        self.schema = Schema.of(schema)
        self._permit_wait = permit_wait
        self._connections = connections
        self._pool: asyncio.Semaphore | None = None
        self.data = dict(data or {})
        self._clock = clock
        self._latency = latency
        self._key_latency = dict(key_latency or {})
        self.fail_calls = fail_calls
        self._fail_keys = dict(fail_keys or {})
        self._never = set(never)
        self._error = error
        self.requests: list[list[Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.closed = 0

    async def lookup_many(self, keys: Any) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        async for found in self._answers(list(keys), each=False):
            out.update(found)
        return out

    async def lookup_each(self, keys: Any) -> AsyncIterator[dict[Any, Any]]:
        async for found in self._answers(list(keys), each=True):
            yield found

    async def _answers(self, keys: list[Any], *, each: bool) -> AsyncIterator[dict[Any, Any]]:
        """The call's answers, grouped by the time they are due, in time order."""
        self.requests.append(keys)
        if self._permit_wait:
            with held_back():
                await self._sleep(self._permit_wait)
        if self._connections is not None:
            if self._pool is None:
                self._pool = asyncio.Semaphore(self._connections)
            with held_back():
                await self._pool.acquire()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if not each and self._never.intersection(keys):
                await asyncio.get_running_loop().create_future()
            latency = self._latency(keys) if callable(self._latency) else self._latency
            due: dict[float, list[Any]] = {}
            for key in keys:
                if key not in self._never:
                    due.setdefault(self._key_latency.get(key, latency), []).append(key)
            if self.fail_calls > 0:
                await self._sleep(latency)
                self.fail_calls -= 1
                raise self._error or LookupFailed("scripted outage", kind="connection")
            waited = 0.0
            for at in sorted(due):
                await self._sleep(at - waited)
                waited = at
                yield {key: self._answer(key) for key in due[at] if self._has_answer(key)}
            if self._never.intersection(keys):
                await asyncio.get_running_loop().create_future()
        finally:
            self.in_flight -= 1
            if self._pool is not None:
                self._pool.release()

    async def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            await (self._clock.sleep(seconds) if self._clock else asyncio.sleep(seconds))

    def _has_answer(self, key: Any) -> bool:
        return self._fail_keys.get(key, 0) > 0 or key in self.data

    def _answer(self, key: Any) -> Any:
        if self._fail_keys.get(key, 0) > 0:
            self._fail_keys[key] -= 1
            return LookupFailed(f"scripted failure of key {key!r}", key=key, kind="status:503")
        return self.data[key]

    async def aclose(self) -> None:
        self.closed += 1

    @property
    def keys_requested(self) -> list[Any]:
        return [key for call in self.requests for key in call]


class ColumnarFakeSource(FakeSource):
    """A :class:`FakeSource` that also answers columnarly (``lookup_arrow``), with the
    same script: each call's outcomes are those ``lookup_many`` gives for its keys."""

    async def lookup_arrow(self, keys: Any, struct_type: Any) -> Any:
        from .lookup.contract.columnar_answer import answer_from_mapping  # needs pyarrow

        listed = keys.to_pylist()
        return answer_from_mapping(listed, await self.lookup_many(listed), struct_type)


class DeferredColumnarFakeSource(ColumnarFakeSource):
    """A :class:`ColumnarFakeSource` that also splits its lookup at the reply
    (``fetch_arrow``): the lane then runs the conversion to columns on its caller's
    thread, as it does a RedisLookup's bulk decode."""

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Any:
        """``lookup_arrow`` with the conversion to columns left as a step for later."""
        from functools import partial

        from .lookup.contract.columnar_answer import answer_from_mapping

        listed = keys.to_pylist()
        found = await self.lookup_many(listed)
        return partial(answer_from_mapping, listed, found, struct_type)


class ManualFunction(AsyncFunction):
    """A callback-style function that completes only when the test says so.

    ``pending`` maps each value to the ResultFuture of its latest call, so a test can
    complete records in any scripted order: ``fn.complete("b", ["B"])``.
    """

    def __init__(self) -> None:
        self.pending: dict[Any, ResultFuture] = {}
        self.calls: list[Any] = []

    def async_invoke(self, value: Any, result: ResultFuture) -> None:
        self.calls.append(value)
        self.pending[value] = result

    def complete(self, value: Any, outputs: Iterable[Any]) -> None:
        self.pending[value].complete(outputs)

    def fail(self, value: Any, error: BaseException) -> None:
        self.pending[value].complete_exceptionally(error)


__all__ = (
    "ColumnarFakeSource",
    "DeferredColumnarFakeSource",
    "FakeClock",
    "FakeFunction",
    "FakeSource",
    "ManualFunction",
    "drive",
    "settle",
)
