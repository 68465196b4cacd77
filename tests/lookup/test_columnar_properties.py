"""Property test: the columnar lane and the per-row join give the same output rows, in
the same order, with the same reasons and row counts, whatever the keys, the answers and
what their caches hold when they start."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from enrich import FixedDelayRetry, LookupCache, LookupFailed, lookup_chunks, retry_on_empty
from enrich.engine.records.call_metrics import JoinMetrics
from enrich.engine.runtime import get_loop
from enrich.lookup.cache.lookup_cache import MISS, cache_scope
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.lookup.outcome import ColumnarJoined, JoinedChunk
from enrich.testing import ColumnarFakeSource, DeferredColumnarFakeSource

pytestmark = pytest.mark.timeout(120)

STRUCT = pa.struct([("value", pa.string())])
KEYS = st.one_of(st.none(), st.integers(0, 12))
ANSWER = st.one_of(
    st.just(None),  # a stored miss
    st.tuples(st.one_of(st.none(), st.text(max_size=3))),  # one row
    st.lists(st.tuples(st.text(max_size=3)), max_size=3),  # 1:N (empty: a miss)
    st.just(LookupFailed("scripted", kind="status:500", retryable=False)),
    st.just(LookupFailed("scripted", kind="status:503", retryable=True)),
)

# What a cache holds for a key when the joins start: a row the store no longer has, a
# cached miss, cached 1:N rows, or an entry that has expired (the key is asked again).
ENTRY = st.sampled_from(["stale", "miss", "many", "expired"])
CACHED: dict[str, Any] = {"stale": ("stale",), "miss": MISS, "many": [("m1",), ("m2",)]}

Out = list[tuple[int, Any, Any]]


def lane_rows(joined: ColumnarJoined | JoinedChunk) -> Out:
    if isinstance(joined, JoinedChunk):
        return per_row_rows(joined)
    structs = joined.structs.to_pylist()
    keep = joined.keep.to_pylist() if joined.keep is not None else [True] * len(structs)
    return [
        (i, None if s is None else (s["value"],), None)
        for i, (s, k) in enumerate(zip(structs, keep, strict=True))
        if k
    ]


def per_row_rows(joined: JoinedChunk) -> Out:
    errors = joined.errors or [None] * len(joined.indices)
    return list(zip(joined.indices, joined.rows, errors, strict=True))


def counts(m: JoinMetrics) -> tuple[Any, ...]:
    return (m.rows_in, m.rows_out, m.misses, m.null_keys, m.timeouts, dict(m.errors))


def warmed(source: Any, state: dict[int, str] | None) -> LookupCache | None:
    """A cache for ``source`` holding ``state`` (None: no cache). With entries in it, it
    is large enough that nothing is evicted, so that what each join reads from it does
    not depend on when the other keys were put."""
    if state is None:
        return None
    cache = LookupCache(max_rows=20 if state else 5, ttl=60)
    store = cache.storage(cache_scope(source))
    now = get_loop().time()  # the clock both joins read
    for key, entry in state.items():
        if entry == "expired":
            store.put(key, ("expired",), now - 61)
        else:
            store.put(key, CACHED[entry], now)
    return cache


@settings(max_examples=120, deadline=None)
@given(
    chunks=st.lists(st.lists(KEYS, max_size=10), min_size=1, max_size=6),
    data=st.dictionaries(st.integers(0, 12), ANSWER),
    never=st.one_of(st.just(set()), st.sets(st.integers(0, 12), max_size=1)),
    how=st.sampled_from(["left", "inner"]),
    policy=st.sampled_from(["null", "drop", "error_column"]),
    state=st.one_of(st.none(), st.dictionaries(st.integers(0, 12), ENTRY, max_size=6)),
    retried=st.sampled_from([None, "errors", "misses"]),
    capacity=st.integers(10, 40),
    max_batch=st.integers(1, 6),
    deferred=st.booleans(),
)
def test_lane_and_per_row_join_agree(
    chunks: list[list[Any]],
    data: dict[int, Any],
    never: set[int],
    how: str,
    policy: str,
    state: dict[int, str] | None,
    retried: str | None,
    capacity: int,
    max_batch: int,
    deferred: bool,
) -> None:
    if never:
        max_batch = 1  # a call that never answers times out every key it carries
    # A real clock: the key that never answers costs its example this long, and keys
    # that do answer must never reach it, even at load 10 (0.2 s did there: a starved
    # loop thread let the timer of an answered key fire first).
    timeout = 1.0 if never else 5.0
    size = max(1, capacity // 4)
    pieces = [
        (n, keys[start : start + size])
        for n, keys in enumerate(chunks)
        for start in range(0, max(len(keys), 1), size)
    ]

    retry = None
    if retried is not None:
        on_result = retry_on_empty if retried == "misses" else None
        retry = FixedDelayRetry(3, 0.01, retry_on_result=on_result)
    per_row_source = ColumnarFakeSource(data, never=never)
    reference = lookup_chunks(
        pieces,
        per_row_source,
        how=how,
        on_error=policy,
        cache=warmed(per_row_source, state),
        capacity=capacity,
        timeout=timeout,
        max_batch=max_batch,
    )
    expected = [(c.tag, per_row_rows(c)) for c in reference]
    metrics = JoinMetrics()
    # deferred: the source hands its answer over undecoded (fetch_arrow), and the lane
    # converts it on this thread, as it does a RedisLookup's bulk decode.
    kind = DeferredColumnarFakeSource if deferred else ColumnarFakeSource
    lane_source = kind(data, never=never)
    lane = ColumnarLane(
        lane_source,
        STRUCT,
        JoinSettings(
            how=how,
            on_error=policy,
            cache=warmed(lane_source, state),
            timeout=timeout,
            capacity=capacity,
            max_batch=max_batch,
            retry=retry,
        ),
        metrics=metrics,
    )
    got = [(j.tag, lane_rows(j)) for j in lane.run((t, pa.array(k, pa.int64())) for t, k in pieces)]
    assert got == expected
    assert counts(metrics) == counts(reference.function.statistics())
