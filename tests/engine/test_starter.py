"""The starter (mailbox/starter.py): records wait for a gate and for their batch, and
their deadline starts with their call. Fake clock, scripted gate: exact and sleep-free."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from enrich import AsyncFunction, FixedDelayRetry, LookupTimeout, ResultFuture
from enrich.engine.caller.wait import AsyncWaitAsyncIterator
from enrich.engine.model import OutputMode
from enrich.engine.wait_settings import WaitSettings
from enrich.testing import FakeClock, FakeFunction, drive, settle

pytestmark = pytest.mark.asyncio


class ScriptedGate:
    """A gate that lets calls through only when the test opens it, and logs both sides."""

    def __init__(self, open_: int = 0) -> None:
        self.permits = asyncio.Semaphore(open_)
        self.entered = 0
        self.left: list[tuple[float, BaseException | None]] = []

    def open(self, calls: int) -> None:
        for _ in range(calls):
            self.permits.release()

    async def enter(self) -> None:
        await self.permits.acquire()
        self.entered += 1

    def leave(self, seconds: float, error: BaseException | None) -> None:
        self.left.append((seconds, error))


class Batches(AsyncFunction):
    """A batch function: each call answers its values after ``latency`` seconds."""

    def __init__(self, clock: FakeClock, latency: float = 0.0) -> None:
        self.clock = clock
        self.latency = latency
        self.calls: list[list[Any]] = []

    def async_invoke_many(self, values: Sequence[Any], results: Sequence[ResultFuture]) -> None:
        self.calls.append(list(values))

        async def answer() -> None:
            await self.clock.sleep(self.latency)
            for value, result in zip(values, results, strict=True):
                result.complete([value])

        asyncio.get_running_loop().create_task(answer())


def run(inputs: Any, fn: Any, clock: FakeClock, gate: Any = None, **settings: Any) -> Any:
    return AsyncWaitAsyncIterator(
        inputs, fn, settings=WaitSettings(**settings), clock=clock, gate=gate
    )


async def collect(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


async def test_a_record_waiting_at_the_gate_does_not_time_out() -> None:
    clock = FakeClock()
    gate = ScriptedGate()
    fn = FakeFunction(clock=clock, latency=0.5)
    task = asyncio.ensure_future(collect(run(["a"], fn, clock, gate, timeout=1.0)))
    await settle()
    clock.advance(60.0)  # a minute at a closed gate: back-pressure, not a timeout
    await settle()
    assert not task.done()
    gate.open(1)
    assert await drive(clock, task) == ["a"]
    assert clock.now() == 60.5
    assert gate.left == [(0.5, None)]


async def test_the_deadline_counts_from_the_call_not_the_admission() -> None:
    clock = FakeClock()
    gate = ScriptedGate()
    fn = FakeFunction(clock=clock, latency=5.0)
    task = asyncio.ensure_future(collect(run(["a"], fn, clock, gate, timeout=1.0)))
    await settle()
    clock.advance(10.0)
    gate.open(1)
    with pytest.raises(LookupTimeout):
        await drive(clock, task)
    assert clock.now() == 10.0 + 1.0
    ((seconds, error),) = gate.left
    assert seconds == 1.0 and isinstance(error, LookupTimeout)


async def test_calls_pass_the_gate_in_admission_order_and_leave_once_each() -> None:
    clock = FakeClock()
    gate = ScriptedGate()
    latency = {0: 3.0, 1: 1.0, 2: 2.0}
    fn = FakeFunction(clock=clock, latency=latency)
    it = run(range(3), fn, clock, gate, timeout=None, mode=OutputMode.UNORDERED)
    task = asyncio.ensure_future(collect(it))
    await settle()
    assert fn.calls == []
    gate.open(1)
    await settle()
    assert fn.calls == [0]
    gate.open(2)
    out = await drive(clock, task)
    assert fn.calls == [0, 1, 2]
    assert out == [1, 2, 0]
    assert sorted(seconds for seconds, _ in gate.left) == [1.0, 2.0, 3.0]
    assert gate.entered == 3
    assert not it._operator.has_timers()


async def test_a_retry_passes_the_gate_again() -> None:
    clock = FakeClock()
    gate = ScriptedGate(open_=10)
    fn = FakeFunction(clock=clock, latency=1.0, fail={"a": 1})
    out = await drive(
        clock, collect(run(["a"], fn, clock, gate, timeout=None, retry=FixedDelayRetry(3, 0.5)))
    )
    assert out == ["a"]
    assert gate.entered == 2
    assert [error is None for _, error in gate.left] == [False, True]
    assert clock.now() == 1.0 + 0.5 + 1.0


async def test_batches_fill_up_to_batch_size_and_the_last_goes_when_the_input_ends() -> None:
    clock = FakeClock()
    fn = Batches(clock, latency=1.0)
    out = await drive(clock, collect(run(range(7), fn, clock, batch_size=3, batch_wait=5.0)))
    assert out == list(range(7))
    assert fn.calls == [[0, 1, 2], [3, 4, 5], [6]]
    assert clock.now() == 1.0  # the last batch did not wait for its batch_wait


async def test_a_partial_batch_goes_after_batch_wait() -> None:
    clock = FakeClock()
    fn = Batches(clock)
    more = asyncio.Event()

    async def inputs() -> AsyncIterator[int]:
        yield 1
        yield 2
        await more.wait()  # the input pauses: records 1 and 2 wait for their batch
        yield 3

    it = run(inputs(), fn, clock, batch_size=10, batch_wait=2.0, timeout=None)
    task = asyncio.ensure_future(collect(it))
    await settle()
    assert fn.calls == []
    clock.advance(1.999)
    await settle()
    assert fn.calls == []
    clock.advance(0.001)
    await settle()
    assert fn.calls == [[1, 2]]
    more.set()
    assert await drive(clock, task) == [1, 2, 3]
    assert fn.calls == [[1, 2], [3]]
    assert not it._operator.has_timers()


async def test_a_batch_call_leaves_the_gate_once() -> None:
    clock = FakeClock()
    gate = ScriptedGate(open_=10)
    fn = Batches(clock, latency=2.0)
    out = await drive(clock, collect(run(range(5), fn, clock, gate, batch_size=5)))
    assert out == list(range(5))
    assert gate.entered == 1
    assert gate.left == [(2.0, None)]


async def test_batch_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        WaitSettings(batch_size=0)
    with pytest.raises(ValueError, match="batch_wait must be seconds >= 0, got -1"):
        WaitSettings(batch_wait=-1)
