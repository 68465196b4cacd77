"""Property tests: random latencies never break ordering, watermarks or capacity."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings, strategies as st

from enrich import Watermark, ordered_wait_async, unordered_wait_async
from enrich.testing import FakeClock, FakeFunction, drive

inputs = st.lists(st.one_of(st.integers(0, 20).map(lambda ms: ms / 10), st.just(None)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(items=inputs, capacity=st.integers(1, 8), ordered=st.booleans())
def test_random_latencies(items: list[float | None], capacity: int, ordered: bool) -> None:
    values = [Watermark(i) if lat is None else (i, lat) for i, lat in enumerate(items)]
    clock = FakeClock()
    fn = FakeFunction(clock=clock, latency=lambda v: v[1])
    wait = ordered_wait_async if ordered else unordered_wait_async

    async def run() -> list[object]:
        it = wait(values, fn, capacity=capacity, clock=clock, timeout=None)
        return [item async for item in it]

    out = asyncio.run(drive(clock, run()))
    assert sorted(map(repr, out)) == sorted(map(repr, values))
    assert fn.max_concurrency <= capacity
    assert clock.pending_timers() == 0
    if ordered:
        assert out == values
    position = {repr(v): i for i, v in enumerate(out)}
    for m, mark in enumerate(values):
        if isinstance(mark, Watermark):
            for i, v in enumerate(values):
                if i != m:
                    assert (position[repr(v)] < position[repr(mark)]) == (i < m)
