"""Time held back by a rate limit (enrich.engine.mailbox.hold) does not count against a timeout:
the hold's arithmetic, the operator's deadlines and the columnar lane's, step by step."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
import pytest

from enrich import FixedDelayRetry, LookupTimeout, lookup_chunks_async
from enrich.engine.caller.wait import AsyncWaitAsyncIterator
from enrich.engine.mailbox.hold import Deadline, Hold, current_hold, held_back, reset_hold, set_hold
from enrich.engine.records.call_metrics import JoinMetrics
from enrich.engine.wait_settings import WaitSettings
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.lookup.outcome import ColumnarJoined
from enrich.testing import ColumnarFakeSource, FakeClock, FakeFunction, FakeSource, drive

pytestmark = pytest.mark.timeout(30)


def test_overlapping_waits_count_once_and_a_release_calls_back() -> None:
    clock = FakeClock()
    hold = Hold(clock)
    released: list[float] = []
    hold.when_released(lambda: released.append(clock.now()))  # none under way: at once
    assert released == [0.0]

    clock.advance(1.0)
    hold.begin()
    clock.advance(1.0)
    hold.begin()  # a second wait, overlapping the first
    dropped = hold.when_released(lambda: released.append(-1.0))
    hold.when_released(lambda: released.append(clock.now()))
    dropped.cancel()
    clock.advance(1.0)
    hold.end()
    assert hold.is_held() and hold.held() == 2.0 and released == [0.0]
    clock.advance(0.5)
    hold.end()

    assert not hold.is_held() and hold.held() == 2.5
    assert released == [0.0, 3.5]
    clock.advance(10.0)
    assert hold.held() == 2.5


def test_a_deadline_moves_on_by_the_time_held_after_it_was_set() -> None:
    clock = FakeClock()
    hold = Hold(clock)
    hold.begin()
    clock.advance(4.0)
    hold.end()  # held before the deadline was set: no effect on it
    deadline = Deadline(clock.now(), 1.0, hold)
    assert deadline.at() == 5.0 and not deadline.is_paused()

    hold.begin()
    clock.advance(3.0)
    assert deadline.is_paused() and deadline.at() == 8.0  # moves on while held
    hold.end()
    clock.advance(1.0)
    assert deadline.at() == 8.0
    assert Deadline(2.0, 1.0, None).at() == 3.0


def test_held_back_marks_the_hold_of_the_current_context_only() -> None:
    clock = FakeClock()
    hold = Hold(clock)
    with held_back():  # no hold set: nothing to mark
        pass
    token = set_hold(hold)
    try:
        assert current_hold() is hold
        with held_back():
            clock.advance(2.0)
            assert hold.is_held()
    finally:
        reset_hold(token)
    assert current_hold() is None and hold.held() == 2.0


async def joined(clock: FakeClock, source: FakeSource, **settings: Any) -> list[Any]:
    it = lookup_chunks_async([("c", [1, 2])], source, clock=clock, **settings)
    out = []
    async for chunk in it:
        errors = chunk.errors or [None] * len(chunk.rows)
        out += list(zip(chunk.rows, errors, strict=True))
    return out


@pytest.mark.asyncio
async def test_waiting_for_a_permit_does_not_time_a_row_out() -> None:
    clock = FakeClock()
    # Each call waits 30 s for its permit (a quota far below the demand), then the store
    # answers in 0.5 s: well within the 1 s timeout once the request may go.
    source = FakeSource({1: ("a",), 2: ("b",)}, clock=clock, permit_wait=30.0, latency=0.5)

    out = await drive(clock, joined(clock, source, timeout=1.0, on_error="error_column"))

    assert out == [(("a",), None), (("b",), None)]
    assert clock.now() == 30.5


@pytest.mark.asyncio
async def test_a_store_that_never_answers_still_times_out_once_the_request_went() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",)}, clock=clock, permit_wait=30.0, never=[2])

    out = await drive(
        clock, joined(clock, source, timeout=1.5, on_error="error_column", max_batch=1)
    )

    assert out == [
        (("a",), None),
        (None, "timeout: record 2 timed out after 1.5s (1 attempt(s))"),
    ]
    assert clock.now() == 31.5  # the permit's 30 s, then the whole timeout


@pytest.mark.asyncio
async def test_a_retry_starts_in_time_when_the_permit_wait_moved_the_deadline() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",), 2: ("b",)}, clock=clock, permit_wait=10.0, fail_keys={2: 1})

    out = await drive(
        clock,
        joined(clock, source, timeout=2.0, retry=FixedDelayRetry(3, 0.5), on_error="error_column"),
    )

    # Key 2 fails at 10 s, past its admission's 2 s: the retry is made all the same, and
    # its own permit wait (10 s more) moves the deadline again.
    assert out == [(("a",), None), (("b",), None)]
    assert clock.now() == 20.5


def test_the_lane_does_not_time_a_chunk_out_while_its_requests_wait_for_permits() -> None:
    struct = pa.struct([("value", pa.string())])
    # Real time on the runtime loop: a permit wait of 0.6 s against a timeout of 0.3 s,
    # and the answer comes in the same step as the permit (no race with the deadline).
    source = ColumnarFakeSource({1: ("one",), 2: ("two",)}, permit_wait=0.6)
    lane = ColumnarLane(
        source,
        struct,
        JoinSettings(
            how="left",
            on_error="error_column",
            cache=None,
            timeout=0.3,
            capacity=8,
            max_batch=1,
        ),
        metrics=JoinMetrics(),
    )

    (out,) = list(lane.run([(0, pa.array([1, 2], pa.int64()))]))

    assert isinstance(out, ColumnarJoined)
    assert out.structs.to_pylist() == [{"value": "one"}, {"value": "two"}]


class LimiterGate:
    """A starter's gate whose wait is a rate limit's, marked as held back as the job
    limiter marks its own; opened by the test."""

    def __init__(self) -> None:
        self.permits = asyncio.Semaphore(0)

    async def enter(self) -> None:
        with held_back():
            await self.permits.acquire()

    def leave(self, seconds: float, error: BaseException | None) -> None:
        pass


@pytest.mark.asyncio
async def test_a_wait_at_the_starters_gate_does_not_move_the_deadlines_of_running_calls() -> None:
    clock = FakeClock()
    gate = LimiterGate()
    gate.permits.release()  # one call may start: "a", whose function never answers
    fn = FakeFunction(clock=clock, never=["a"])
    run = AsyncWaitAsyncIterator(
        ["a", "b"], fn, settings=WaitSettings(timeout=1.0), clock=clock, gate=gate
    )

    with pytest.raises(LookupTimeout):  # "b" waits at the closed gate all along
        await drive(clock, collect_all(run))

    assert clock.now() == 1.0  # "a" timed out on time: the gate's wait is not its own


async def collect_all(iterator: Any) -> list[Any]:
    return [item async for item in iterator]
