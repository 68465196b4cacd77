"""Property test: whatever the keys, answers, failures and timings, every row of every
chunk is accounted for, in order, and the metrics add up."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings, strategies as st

from enrich import FixedDelayRetry, LookupCache, LookupFailed, lookup_chunks_async
from enrich.testing import FakeClock, FakeSource, drive

KEYS = st.one_of(st.none(), st.integers(0, 12), st.just([1]))  # [1]: an unhashable key
ANSWER = st.one_of(
    st.just(None),  # a stored miss
    st.tuples(st.text(max_size=3)),  # one row
    st.lists(st.tuples(st.text(max_size=3)), max_size=3),  # 1:N (empty: a miss)
    st.just(LookupFailed("scripted", kind="status:500", retryable=False)),
)


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(st.lists(KEYS, max_size=8), min_size=1, max_size=6),
    data=st.dictionaries(st.integers(0, 12), ANSWER),
    never=st.sets(st.integers(0, 12), max_size=2),
    latency=st.integers(0, 3),
    how=st.sampled_from(["left", "inner"]),
    policy=st.sampled_from(["null", "drop", "error_column"]),
    cached=st.booleans(),
    retried=st.booleans(),
    max_batch=st.integers(1, 6),
)
def test_every_row_is_accounted_for(
    chunks: list[list[Any]],
    data: dict[int, Any],
    never: set[int],
    latency: int,
    how: str,
    policy: str,
    cached: bool,
    retried: bool,
    max_batch: int,
) -> None:
    clock = FakeClock()
    source = FakeSource(data, clock=clock, latency=latency / 10, never=never)
    if never:
        max_batch = 1  # a call that never answers times out every key it carries
    it = lookup_chunks_async(
        list(enumerate(chunks)),
        source,
        how=how,
        on_error=policy,
        cache=LookupCache(max_rows=5, ttl=1.0) if cached else None,
        retry=FixedDelayRetry(2, 0.05) if retried else None,
        timeout=1.0,
        max_batch=max_batch,
        capacity=32,
        clock=clock,
    )

    async def run() -> list[Any]:
        return [chunk async for chunk in it]

    joined = asyncio.run(drive(clock, run()))
    assert [c.tag for c in joined] == list(range(len(chunks)))  # ORDERED, none lost
    stats = it.function.statistics()
    dropped = 0
    for chunk, keys in zip(joined, chunks, strict=True):
        assert chunk.indices == sorted(chunk.indices)  # rows keep their order
        for i, key in enumerate(keys):
            n = chunk.indices.count(i)
            if isinstance(key, list):  # unhashable: that row's error
                assert n == (0 if policy == "drop" else 1)
                dropped += n == 0
                continue
            answer = data.get(key) if key is not None else None
            if key in never:
                expected = 0 if policy == "drop" else 1  # it timed out
            elif isinstance(answer, LookupFailed):
                expected = 0 if policy == "drop" else 1
            elif isinstance(answer, tuple):
                expected = 1
            elif isinstance(answer, list) and answer:
                expected = len(answer)
            else:  # a miss or a null key
                expected = 1 if how == "left" else 0
            assert n == expected, (key, answer, chunk)
            dropped += n == 0
        if chunk.errors is not None:
            assert len(chunk.errors) == len(chunk.indices)
    assert stats.rows_in == sum(map(len, chunks))
    assert stats.rows_out == sum(len(c.indices) for c in joined)
    assert clock.pending_timers() == 0
