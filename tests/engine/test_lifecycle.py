"""open() and close() run once per run, whatever ends it, in both iterators."""

from __future__ import annotations

import asyncio
import gc

import pytest

from enrich import ordered_wait, ordered_wait_async, unordered_wait
from enrich.engine.runtime import run_sync
from enrich.testing import FakeFunction, settle


def slow_after_ten(value: int) -> float:
    return 0.0 if value < 10 else 3600.0


@pytest.mark.parametrize("wait", [ordered_wait, unordered_wait])
def test_breaking_out_and_dropping_the_iterator_closes_once(wait: object) -> None:
    fn = FakeFunction(latency=slow_after_ten)  # 40 calls are in flight at the break
    it = wait(range(10**9), fn, capacity=50)  # type: ignore[operator]
    for seen, _ in enumerate(it, 1):
        if seen == 10:
            break
    run = it._run  # the run's state outlives the dropped iterator
    del it
    gc.collect()
    run_sync(settle)  # the cancelled calls' callbacks, and a second shutdown if any, run
    assert (fn.opened, fn.closed) == (1, 1)
    # The cancelled calls are the shutdown's doing, not the records' own failures.
    assert run.statistics().errors == 0
    assert fn.in_flight == 0


@pytest.mark.asyncio
async def test_the_async_twin_closes_once_when_dropped_after_a_break() -> None:
    fn = FakeFunction(latency=slow_after_ten)
    it = ordered_wait_async(range(10**9), fn, capacity=50)
    seen = 0
    async for _ in it:
        seen += 1
        if seen == 10:
            break
    op = it._operator
    del it
    gc.collect()
    # asyncio closes a dropped async generator in a task of its own: let it run.
    for _ in range(200):
        if fn.closed and fn.in_flight == 0:
            break
        await asyncio.sleep(0.001)
    await settle()  # a second shutdown, if any, runs now
    assert (fn.opened, fn.closed) == (1, 1)
    assert op is not None and op.statistics().errors == 0
    assert fn.in_flight == 0


@pytest.mark.asyncio
async def test_the_async_twin_closes_once_on_aclose() -> None:
    fn = FakeFunction(latency=slow_after_ten)
    it = ordered_wait_async(range(10**9), fn, capacity=50)
    seen = 0
    async for _ in it:
        seen += 1
        if seen == 10:
            break
    await it.aclose()
    await settle()
    assert (fn.opened, fn.closed) == (1, 1)
    assert it.statistics().errors == 0
