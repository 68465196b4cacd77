"""A row's timeout measures the store: waiting behind our own requests for a connection
never times a row out, and a call the store does not answer still times out (the
columnar lane's per-call deadlines, enrich.lookup.lane.source_calls; the per-row join's
run hold, enrich.engine.mailbox.hold).

The lane runs on the runtime loop in real time: each test keeps its store's own answer
far inside the timeout (a 50 ms call against a 1 s timeout) and makes the queue behind a
one-connection pool far longer than the timeout, so no outcome depends on how busy the
machine is. The per-row test runs on a FakeClock and asserts exact times.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from enrich import FixedDelayRetry, LookupTimeout, lookup_chunks_async
from enrich.engine.records.call_metrics import JoinMetrics
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.lookup.lane.source_calls import Budget
from enrich.lookup.outcome import ColumnarJoined, JoinedChunk
from enrich.testing import ColumnarFakeSource, FakeClock, FakeSource, drive

pytestmark = pytest.mark.timeout(120)

STRUCT = pa.struct([("value", pa.string())])
KEYS = 40  # one call each (max_batch=1), 50 ms each on one connection: a 2 s queue


def lane(source: Any, **settings: Any) -> ColumnarLane:
    options: dict[str, Any] = {
        "how": "left",
        "on_error": "error_column",
        "cache": None,
        "timeout": 1.0,
        "capacity": 1024,
        "max_batch": 1,
    }
    options.update(settings)
    return ColumnarLane(source, STRUCT, JoinSettings(**options), metrics=JoinMetrics())


def joined(run: ColumnarLane, keys: list[int]) -> tuple[list[Any], list[str | None]]:
    """The chunk's rows (a dict or None each) and their error reasons."""
    (out,) = list(run.run([(0, pa.array(keys, pa.int64()))]))
    if isinstance(out, ColumnarJoined):  # no error: the columnar form
        return out.structs.to_pylist(), [None] * len(keys)
    assert isinstance(out, JoinedChunk)  # errors: assembled row by row
    rows = [None if row is None else {"value": row[0]} for row in out.rows]
    return rows, list(out.errors or [None] * len(rows))


def data() -> dict[int, tuple[str]]:
    return {key: (f"v{key}",) for key in range(KEYS)}


def test_rows_queued_behind_our_own_requests_do_not_time_out() -> None:
    source = ColumnarFakeSource(data(), latency=0.05, connections=1)
    run = lane(source)

    rows, reasons = joined(run, list(range(KEYS)))

    assert rows == [{"value": f"v{key}"} for key in range(KEYS)]
    assert reasons == [None] * KEYS
    assert run.statistics().timeouts == 0
    assert source.max_in_flight == 1  # they did queue, one at a time


def test_a_call_the_store_never_answers_times_its_keys_out_and_frees_the_others() -> None:
    # Key 7's call holds the only connection and never gets an answer: it times out
    # after its own second at the store; the calls queued behind it go on afterwards.
    source = ColumnarFakeSource(data(), latency=0.05, connections=1, never=[7])
    run = lane(source)

    rows, reasons = joined(run, list(range(KEYS)))

    assert rows[7] is None
    assert reasons[7] == "timeout: record 7 timed out after 1s (1 attempt(s))"
    assert [row for i, row in enumerate(rows) if i != 7] == [
        {"value": f"v{key}"} for key in range(KEYS) if key != 7
    ]
    assert run.statistics().timeouts == 1


def test_a_retry_after_a_long_queue_still_has_its_keys_time() -> None:
    # The last key fails once, after ~2 s in the queue: its budget was spent only by its
    # own 50 ms call, so its retry (0.1 s later) is made and answers.
    source = ColumnarFakeSource(data(), latency=0.05, connections=1, fail_keys={KEYS - 1: 1})
    run = lane(source, retry=FixedDelayRetry(3, 0.1))

    rows, _ = joined(run, list(range(KEYS)))

    assert rows[-1] == {"value": f"v{KEYS - 1}"}
    assert run.statistics().timeouts == 0
    assert source.keys_requested.count(KEYS - 1) == 2


def test_a_budget_charges_calls_and_waits_per_key() -> None:
    budget = Budget.full(4, 1.0)
    budget.spend(0, 2, 0.25)  # a call for keys 0 and 1
    assert budget.seconds(0, 4) == 0.75 and budget.seconds(2, 4) == 1.0
    part = budget.take([1, 3])
    part.spend(0, 2, 0.5)  # a retry's wait and call for keys 1 and 3
    budget.put([1, 3], part)
    assert budget.left.tolist() == [0.75, 0.25, 1.0, 0.5]
    assert budget.due(1, 10.0) == 10.25
    assert np.array_equal(part.left, [0.25, 0.5])


@pytest.mark.asyncio
async def test_the_per_row_join_does_not_time_rows_out_while_they_wait_for_a_connection() -> None:
    clock = FakeClock()
    # Ten calls of 0.5 s on one connection: the last is answered at 5 s, its own call
    # took 0.5 s of its 1 s timeout.
    source = FakeSource(
        {key: (f"v{key}",) for key in range(10)}, clock=clock, latency=0.5, connections=1
    )
    it = lookup_chunks_async(
        [("c", list(range(10)))], source, clock=clock, timeout=1.0, max_batch=1
    )

    async def rows() -> list[Any]:
        return [row async for chunk in it for row in chunk.rows]

    out = await drive(clock, rows())

    assert out == [(f"v{key}",) for key in range(10)]
    assert clock.now() == 5.0


@pytest.mark.asyncio
async def test_the_per_row_join_still_times_out_a_call_at_the_store() -> None:
    clock = FakeClock()
    source = FakeSource({1: ("a",)}, clock=clock, latency=0.5, connections=1, never=[2])
    it = lookup_chunks_async([("c", [1, 2])], source, clock=clock, timeout=1.0, max_batch=1)

    async def rows() -> list[Any]:
        return [row async for chunk in it for row in chunk.rows]

    with pytest.raises(LookupTimeout):
        await drive(clock, rows())
    assert clock.now() == 1.5  # key 2's call went at 0.5 s, after key 1's


@pytest.mark.asyncio
async def test_the_per_row_join_times_out_a_hung_call_while_others_wait_behind_it() -> None:
    clock = FakeClock()
    # Key 2's call holds the only connection and is never answered; key 3 waits for it.
    # Key 2 times out after its own second at the store (at 1.5 s), which frees the
    # connection: key 3 is answered at 2.0 s.
    source = FakeSource({1: ("a",), 3: ("c",)}, clock=clock, latency=0.5, connections=1, never=[2])
    it = lookup_chunks_async(
        [("c", [1, 2, 3])],
        source,
        clock=clock,
        timeout=1.0,
        max_batch=1,
        on_error="error_column",
    )

    async def rows() -> list[Any]:
        out = []
        async for chunk in it:
            out += list(zip(chunk.rows, chunk.errors or [], strict=True))
        return out

    out = await drive(clock, rows())

    assert out == [
        (("a",), None),
        (None, "timeout: record 2 timed out after 1s (1 attempt(s))"),
        (("c",), None),
    ]
    assert clock.now() == 2.0
    assert it.function.statistics().timeouts == 1
