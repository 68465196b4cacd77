"""Answers reach their rows key by key: a hanging key costs only its own rows, a row that
times out leaves the request it shared, and under UNORDERED answered rows leave (and free
their capacity) without waiting for their chunk-mates. Exact times on a FakeClock."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from enrich import FixedDelayRetry, LookupFailed, lookup_chunks_async
from enrich.testing import FakeClock, FakeSource, drive


async def collect(clock: FakeClock, it: Any) -> list[tuple[Any, list[int], list[Any], float]]:
    """Every JoinedChunk as (tag, indices, errors or rows, when it came out)."""
    out = []
    async for chunk in it:
        errors = chunk.errors if chunk.errors is not None else [None] * len(chunk.rows)
        pairs = list(zip(chunk.rows, errors, strict=True))
        out.append((chunk.tag, chunk.indices, pairs, clock.now()))
    return out


class ManyOnly:
    """A source with ``lookup_many`` alone (no hand-over): it still works unchanged."""

    def __init__(self, inner: FakeSource) -> None:
        self.inner = inner
        self.schema = inner.schema

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        return await self.inner.lookup_many(keys)

    async def aclose(self) -> None:
        await self.inner.aclose()


def twenty_and_a_hanging_key(clock: FakeClock) -> tuple[FakeSource, list[Any]]:
    keys: list[Any] = [*range(20), "hangs"]
    data = {k: (f"v{k}",) for k in keys}
    return FakeSource(data, clock=clock, latency=0.1, never=["hangs"]), keys


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["ordered", "unordered"])
async def test_a_hanging_key_times_out_alone_in_its_call(mode: str) -> None:
    clock = FakeClock()
    source, keys = twenty_and_a_hanging_key(clock)
    it = lookup_chunks_async(
        [("c", keys)], source, on_error="error_column", timeout=1.0, capacity=84,
        mode=mode, clock=clock,
    )  # fmt: skip
    out = await drive(clock, collect(clock, it))
    assert source.requests == [keys]  # one call for all 21 keys
    rows = {i: (row, error) for _, indices, pairs, _ in out for i, (row, error) in
            zip(indices, pairs, strict=True)}  # fmt: skip
    assert {i: rows[i][0] for i in range(20)} == {i: (f"v{i}",) for i in range(20)}
    assert rows[20] == (None, "timeout: record 'hangs' timed out after 1s (1 attempt(s))")
    if mode == "unordered":  # the 20 answered rows left at once, the hanging one at 1.0
        assert [(indices, when) for _, indices, _, when in out] == [(list(range(20)), 0.1),
                                                                    ([20], 1.0)]  # fmt: skip
    else:
        assert [when for *_, when in out] == [1.0]


@pytest.mark.asyncio
async def test_a_source_without_hand_over_answers_when_its_call_returns() -> None:
    clock = FakeClock()
    source, _ = twenty_and_a_hanging_key(clock)
    it = lookup_chunks_async(
        [("c", [1, 2, 3])], ManyOnly(source), timeout=1.0, mode="unordered", clock=clock
    )
    out = await drive(clock, collect(clock, it))
    assert [(indices, when) for _, indices, _, when in out] == [([0, 1, 2], 0.1)]


@pytest.mark.asyncio
async def test_answered_rows_leave_early_and_free_their_capacity() -> None:
    clock = FakeClock()
    slow = {f"s{n}": 0.5 for n in range(4)}
    keys = [*slow, *(f"f{n}" for n in range(8))]
    source = FakeSource({k: (k,) for k in keys}, clock=clock, latency=0.1, key_latency=slow)
    chunks = [(n, [f"s{n}", f"f{n}"]) for n in range(4)] + [(4, ["f4", "f5"]), (5, ["f6", "f7"])]
    it = lookup_chunks_async(
        chunks, source, capacity=8, timeout=5.0, mode="unordered", clock=clock
    )  # capacity 8: chunks of 2 rows, the first four fill it
    out = await drive(clock, collect(clock, it))
    got = sorted((when, tag, indices) for tag, indices, _, when in out)
    # At 0.1 the fast row of each of the first chunks leaves; the four units it frees
    # let chunks 4 and 5 in at once, answered at 0.2, long before the slow rows (0.5).
    assert got == [
        (0.1, 0, [1]), (0.1, 1, [1]), (0.1, 2, [1]), (0.1, 3, [1]),
        (0.2, 4, [0, 1]), (0.2, 5, [0, 1]),
        (0.5, 0, [0]), (0.5, 1, [0]), (0.5, 2, [0]), (0.5, 3, [0]),
    ]  # fmt: skip
    assert it.statistics().peak_in_flight <= 6  # records; never more than 8 rows
    assert clock.pending_timers() == 0


@pytest.mark.asyncio
async def test_a_row_that_timed_out_leaves_the_shared_request_and_the_other_retries() -> None:
    clock = FakeClock()
    latencies = iter([0.125, 0.75, 0.0625])  # the second call is slow: A times out in it

    def latency(keys: Iterable[Any]) -> float:
        return next(latencies)

    source = FakeSource({"k": ("v",)}, clock=clock, latency=latency, fail_keys={"k": 2})

    async def chunks() -> Any:
        yield ("A", ["k"])  # admitted at 0.0: deadline 1.0
        await clock.sleep(0.5)
        yield ("B", ["k"])  # admitted at 0.5: deadline 1.5, joins the call in flight

    it = lookup_chunks_async(
        chunks(), source, on_error="error_column", timeout=1.0,
        retry=FixedDelayRetry(4, 0.25), clock=clock,
    )  # fmt: skip
    out = await drive(clock, collect(clock, it))
    # Call 1 (0-0.125) fails; call 2 (0.375-1.125) fails after A timed out at 1.0; the
    # next retry (1.375) starts before B's own deadline (1.5): call 3 answers B at 1.4375.
    assert out == [
        ("A", [0], [(None, "timeout: record 'k' timed out after 1s (2 attempt(s))")], 1.0),
        ("B", [0], [(("v",), None)], 1.4375),
    ]
    assert len(source.requests) == 3
    assert clock.pending_timers() == 0


@pytest.mark.asyncio
async def test_a_row_whose_deadline_comes_before_the_retry_keeps_the_last_outcome() -> None:
    clock = FakeClock()
    source = FakeSource({"k": ("v",)}, clock=clock, latency=0.1, fail_keys={"k": 3})

    async def chunks() -> Any:
        yield ("A", ["k"])  # deadline 1.0
        await clock.sleep(0.45)
        yield ("B", ["k"])  # deadline 1.45

    it = lookup_chunks_async(
        chunks(), source, on_error="error_column", timeout=1.0,
        retry=FixedDelayRetry(5, 0.3), clock=clock,
    )  # fmt: skip
    out = await drive(clock, collect(clock, it))
    # Calls at 0.0, 0.4, 0.8 fail; the next retry would start at 1.2: after A's deadline
    # (A keeps the last failure, at 0.9), before B's (B is retried and answered at 1.3).
    error = "status:503: scripted failure of key 'k'"
    assert out == [("A", [0], [(None, error)], 0.9), ("B", [0], [(("v",), None)], 1.3)]
    assert len(source.requests) == 4


def test_failed_keys_are_lookup_failures() -> None:
    assert isinstance(FakeSource({}, fail_keys={1: 1})._answer(1), LookupFailed)


@pytest.mark.asyncio
async def test_a_lone_row_that_times_out_reports_every_attempt_made() -> None:
    clock = FakeClock()
    source = FakeSource({"k": ("v",)}, clock=clock, latency=0.25, fail_keys={"k": 2})

    async def chunks() -> Any:
        yield ("A", ["k"])  # deadline 1.0; nobody else waits for "k"

    it = lookup_chunks_async(
        chunks(), source, on_error="error_column", timeout=1.0,
        retry=FixedDelayRetry(4, 0.125), clock=clock,
    )  # fmt: skip
    out = await drive(clock, collect(clock, it))
    # Calls at 0.0 and 0.375 fail; the third (0.75) is still in flight at the deadline.
    assert out == [
        ("A", [0], [(None, "timeout: record 'k' timed out after 1s (3 attempt(s))")], 1.0)
    ]
    assert len(source.requests) == 3
