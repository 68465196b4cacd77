"""Operator semantics on the async twin, with a fake clock: exact and sleep-free."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import enrich
from enrich import (
    AsyncFunction,
    ExponentialBackoffRetry,
    FixedDelayRetry,
    LookupTimeout,
    ResultFuture,
    Watermark,
    ordered_wait_async,
    unordered_wait_async,
)
from enrich.testing import FakeClock, FakeFunction, ManualFunction, drive, settle

pytestmark = pytest.mark.asyncio


async def collect(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


async def test_ordered_emits_in_input_order_whatever_the_completion_order() -> None:
    clock = FakeClock()
    latency = {0: 5.0, 1: 1.0, 2: 3.0, 3: 0.0, 4: 2.0}
    fn = FakeFunction(lambda v: [v * 10], clock=clock, latency=latency)
    out = await drive(clock, collect(ordered_wait_async(range(5), fn, clock=clock, timeout=None)))
    assert out == [0, 10, 20, 30, 40]
    assert clock.now() == 5.0


async def test_unordered_emits_in_completion_order() -> None:
    clock = FakeClock()
    latency = {0: 5.0, 1: 1.0, 2: 3.0, 3: 0.0, 4: 2.0}
    fn = FakeFunction(clock=clock, latency=latency)
    out = await drive(clock, collect(unordered_wait_async(range(5), fn, clock=clock, timeout=None)))
    assert out == [3, 1, 4, 2, 0]


async def test_unordered_keeps_records_on_their_side_of_a_watermark() -> None:
    clock = FakeClock()
    latency = {"a": 4.0, "b": 1.0, "c": 0.5, "d": 0.0}
    fn = FakeFunction(clock=clock, latency=latency)
    inputs = ["a", "b", Watermark(100), "c", "d"]
    out = await drive(clock, collect(unordered_wait_async(inputs, fn, clock=clock, timeout=None)))
    assert out == ["b", "a", Watermark(100), "d", "c"]


async def test_outputs_are_flattened_and_empty_results_emit_nothing() -> None:
    fn = FakeFunction(lambda v: [v] * v)
    out = await collect(ordered_wait_async([2, 0, 3], fn))
    assert out == [2, 2, 3, 3, 3]


async def test_plain_async_functions_are_accepted() -> None:
    async def double(value: int) -> list[int]:
        await asyncio.sleep(0)
        return [value * 2]

    assert await collect(ordered_wait_async(range(4), double)) == [0, 2, 4, 6]


async def test_capacity_bounds_in_flight_records_and_blocks_the_producer() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency=1.0)
    pulled: list[int] = []

    def source():
        for i in range(20):
            pulled.append(i)
            yield i

    it = ordered_wait_async(source(), fn, capacity=3, clock=clock, timeout=None)
    consumer = asyncio.ensure_future(collect(it))
    await settle()
    # Three in flight, nothing more pulled from the input while they run.
    assert fn.in_flight == 3
    assert len(pulled) == 3
    assert it.statistics().in_flight == 3
    out = await drive(clock, consumer)
    assert out == list(range(20))
    assert fn.max_concurrency == 3
    assert it.statistics().peak_in_flight == 3


async def test_timeout_is_exact_and_raises_lookup_timeout_with_the_value() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency={"slow": 10.0})
    it = ordered_wait_async(["fast", "slow"], fn, timeout=2.5, clock=clock)
    received: list[Any] = []

    async def consume() -> None:
        async for item in it:
            received.append(item)

    with pytest.raises(LookupTimeout) as info:
        await drive(clock, consume())
    assert received == ["fast"]
    assert info.value.value == "slow"
    assert info.value.timeout == 2.5
    assert isinstance(info.value, TimeoutError)
    assert clock.now() == 2.5
    stats = it.statistics()
    assert (stats.timeouts, stats.errors, stats.completed) == (1, 1, 1)


class Fallback(AsyncFunction):
    def __init__(self, fn: FakeFunction) -> None:
        self.fn = fn
        self.timed_out: list[Any] = []

    async def invoke(self, value: Any) -> Any:
        return await self.fn.invoke(value)

    def timeout(self, value: Any, result: ResultFuture) -> None:
        self.timed_out.append(value)
        result.complete([f"{value}-fallback"])


async def test_timeout_hook_may_complete_with_a_fallback() -> None:
    clock = FakeClock()
    fn = Fallback(FakeFunction(clock=clock, latency={"b": 9.0}))
    out = await drive(clock, collect(ordered_wait_async("abc", fn, timeout=1.0, clock=clock)))
    assert out == ["a", "b-fallback", "c"]
    assert fn.timed_out == ["b"]
    assert clock.pending_timers() == 0


async def test_a_result_after_the_timeout_is_dropped_and_the_first_completion_wins() -> None:
    clock = FakeClock()
    manual = ManualFunction()

    class Hook(ManualFunction):
        def timeout(self, value: Any, result: ResultFuture) -> None:
            result.complete(["timed-out"])

    manual = Hook()
    it = ordered_wait_async(["x", "y"], manual, timeout=1.0, clock=clock)
    consumer = asyncio.ensure_future(collect(it))
    await settle()
    manual.complete("y", ["y1"])
    manual.complete("y", ["y2"])  # a second completion of the same record: ignored
    clock.advance(1.0)  # x times out and completes through the hook
    await settle()
    manual.complete("x", ["late"])  # after its timeout: dropped
    assert await consumer == ["timed-out", "y1"]
    assert clock.pending_timers() == 0


async def test_no_timer_is_left_after_the_input_is_drained() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency=lambda v: v % 3)
    retry = FixedDelayRetry(3, 0.5)
    fn_fail = FakeFunction(clock=clock, latency=lambda v: v % 3, fail={4: 1, 7: 2})
    for func, r in ((fn, None), (fn_fail, retry)):
        it = ordered_wait_async(range(10), func, timeout=30.0, retry=r, clock=clock, capacity=4)
        assert await drive(clock, collect(it)) == list(range(10))
        assert clock.pending_timers() == 0
        assert it._operator is not None and not it._operator.has_timers()


async def test_an_exception_propagates_with_its_cause_and_the_operator_closes() -> None:
    clock = FakeClock()
    root = KeyError("dimension missing")

    class Boom(AsyncFunction):
        closed = 0

        async def invoke(self, value: Any) -> Any:
            if value == 2:
                raise RuntimeError(f"lookup of {value} failed") from root
            if value == 3:
                await clock.sleep(5.0)
            return [value]

        def close(self) -> None:
            Boom.closed += 1

    it = ordered_wait_async(range(5), Boom(), clock=clock, timeout=10)
    received: list[Any] = []
    with pytest.raises(RuntimeError, match="lookup of 2 failed") as info:
        async for item in it:
            received.append(item)
    assert info.value.__cause__ is root
    assert received == [0, 1]
    assert Boom.closed == 1
    # The record still sleeping was cancelled and its timers dropped.
    await settle()
    assert clock.pending_timers() == 0
    assert [t for t in asyncio.all_tasks() if "invoke" in repr(t)] == []


async def test_complete_exceptionally_propagates() -> None:
    manual = ManualFunction()
    it = ordered_wait_async(["a"], manual)
    consumer = asyncio.ensure_future(collect(it))
    await settle()
    manual.fail("a", ValueError("bad record"))
    with pytest.raises(ValueError, match="bad record"):
        await consumer


async def test_a_non_iterable_result_is_a_clear_error() -> None:
    async def wrong(value: int) -> int:
        return value

    with pytest.raises(TypeError, match="iterable of outputs, got 7 for record 7"):
        await collect(ordered_wait_async([7], wrong))


async def test_fixed_delay_retry_recovers_at_exact_times() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, fail={"a": 2})
    it = ordered_wait_async(["a"], fn, retry=FixedDelayRetry(3, 0.25), clock=clock, timeout=10)
    assert await drive(clock, collect(it)) == ["a"]
    assert fn.calls == ["a", "a", "a"]
    assert clock.now() == 0.25 + 0.25
    assert it.statistics().retries == 2


async def test_exponential_backoff_delays_grow_and_are_capped() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, fail={"a": 4})
    retry = ExponentialBackoffRetry(5, initial_delay=0.1, max_delay=0.3, multiplier=2.0)
    it = ordered_wait_async(["a"], fn, retry=retry, clock=clock, timeout=None)
    assert await drive(clock, collect(it)) == ["a"]
    assert clock.now() == pytest.approx(0.1 + 0.2 + 0.3 + 0.3)


async def test_retries_used_up_raise_the_last_error() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, fail={"a": 5}, error=lambda v: ConnectionError(f"down for {v}"))
    it = ordered_wait_async(["a"], fn, retry=FixedDelayRetry(3, 1.0), clock=clock, timeout=None)
    with pytest.raises(ConnectionError, match="down for a"):
        await drive(clock, collect(it))
    assert len(fn.calls) == 3


async def test_retry_on_result_retries_misses_then_emits_the_last_result() -> None:
    clock = FakeClock()
    answers = {"hit-later": [[], [], ["found"]], "never": [[], [], [], []]}

    async def lookup(value: str) -> list[str]:
        return answers[value].pop(0)

    retry = FixedDelayRetry(3, 1.0, retry_on_result=enrich.retry_on_empty)
    it = ordered_wait_async(["hit-later", "never"], lookup, retry=retry, clock=clock, timeout=None)
    assert await drive(clock, collect(it)) == ["found"]
    assert len(answers["never"]) == 1  # three calls, then the empty result stands
    assert it.statistics().retries == 4


async def test_permanent_errors_are_not_retried_by_default() -> None:
    clock = FakeClock()
    error = enrich.LookupFailed("401 unauthorized", kind="status:401", retryable=False)
    fn = FakeFunction(clock=clock, fail={"a": 1}, error=error)
    it = ordered_wait_async(["a"], fn, retry=FixedDelayRetry(3, 1.0), clock=clock, timeout=None)
    with pytest.raises(enrich.LookupFailed):
        await drive(clock, collect(it))
    assert fn.calls == ["a"]


async def test_retry_after_hint_lengthens_the_delay() -> None:
    clock = FakeClock()
    error = enrich.LookupFailed("503", kind="status:503", retry_after=2.0)
    fn = FakeFunction(clock=clock, fail={"a": 1}, error=error)
    it = ordered_wait_async(["a"], fn, retry=FixedDelayRetry(2, 0.1), clock=clock, timeout=None)
    assert await drive(clock, collect(it)) == ["a"]
    assert clock.now() == 2.0


async def test_a_retry_that_would_start_after_the_deadline_is_not_made() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency=0.4, fail={"a": 10}, error=lambda v: OSError("flaky"))
    it = ordered_wait_async(["a"], fn, retry=FixedDelayRetry(10, 0.5), clock=clock, timeout=1.5)
    # Calls at 0 and 0.9 fail at 0.4 and 1.3; the next would start at 1.8, past the
    # deadline, so the last error stands at once instead of a timeout at 1.5.
    with pytest.raises(OSError, match="flaky"):
        await drive(clock, collect(it))
    assert len(fn.calls) == 2
    assert clock.now() == pytest.approx(1.3)
    assert clock.pending_timers() == 0


async def test_the_total_timeout_counts_every_attempt() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency=0.4, fail={"a": 10}, error=lambda v: OSError("flaky"))
    it = ordered_wait_async(["a"], fn, retry=FixedDelayRetry(10, 0.5), clock=clock, timeout=2.0)
    # Calls at 0, 0.9 and 1.8; the third is still running at the deadline.
    with pytest.raises(LookupTimeout) as info:
        await drive(clock, collect(it))
    assert info.value.attempts == 3
    assert clock.now() == 2.0
    await settle()
    assert fn.in_flight == 0  # the running call was cancelled
    assert clock.pending_timers() == 0


async def test_open_and_close_run_once_per_run() -> None:
    fn = FakeFunction()
    assert await collect(ordered_wait_async(range(3), fn)) == [0, 1, 2]
    assert (fn.opened, fn.closed) == (1, 1)


async def test_async_open_and_close_hooks() -> None:
    events: list[str] = []

    class Hooks(AsyncFunction):
        async def open(self) -> None:
            events.append("open")

        async def invoke(self, value: Any) -> Any:
            events.append(f"call {value}")
            return [value]

        async def close(self) -> None:
            events.append("close")

    assert await collect(ordered_wait_async([1], Hooks())) == [1]
    assert events == ["open", "call 1", "close"]


async def test_breaking_out_early_cancels_and_closes() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency={1: 100.0})
    it = ordered_wait_async(range(5), fn, clock=clock, timeout=None)
    async for item in it:
        assert item == 0
        break
    await it.aclose()
    assert fn.closed == 1
    await settle()
    assert fn.in_flight == 0


async def test_asyncio_timeout_works_inside_invoke() -> None:
    """Each record runs in a task of its own, even for its eager first step."""

    async def guarded(value: int) -> list[Any]:
        assert asyncio.current_task() is not None
        async with asyncio.timeout(5):
            if value % 2:
                await asyncio.sleep(0)
            return [value]

    assert await collect(ordered_wait_async(range(6), guarded)) == list(range(6))


async def test_contextvars_do_not_leak_between_records() -> None:
    import contextvars

    var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=-1)

    async def setter(value: int) -> list[int]:
        seen = var.get()
        var.set(value)
        return [seen]

    assert await collect(ordered_wait_async(range(4), setter)) == [-1, -1, -1, -1]


async def test_a_callback_function_completed_from_another_thread() -> None:
    import threading

    class Threaded(AsyncFunction):
        def async_invoke(self, value: Any, result: ResultFuture) -> None:
            threading.Thread(target=result.complete, args=([value + 1],)).start()

    out = await collect(unordered_wait_async(range(50), Threaded(), capacity=7))
    assert sorted(out) == list(range(1, 51))


async def test_statistics_are_readable_while_running_and_after() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency=1.0, fail={3: 1})
    it = ordered_wait_async(
        range(6), fn, clock=clock, capacity=4, retry=FixedDelayRetry(2, 0), timeout=None
    )
    consumer = asyncio.ensure_future(collect(it))
    await settle()
    assert it.statistics().in_flight == 4
    await drive(clock, consumer)
    stats = it.statistics()
    assert stats == enrich.OperatorStatistics(
        in_flight=0, peak_in_flight=4, completed=6, timeouts=0, retries=1, errors=0
    )
