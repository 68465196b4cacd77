"""The columnar lane's hand-over (fetched answers are decoded on the task thread) and its
cache, shared with the per-row join."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pyarrow as pa
import pytest

from enrich import LookupCache, LookupFailed, lookup_chunks
from enrich.engine.records.call_metrics import JoinMetrics
from enrich.engine.runtime import run_sync
from enrich.lookup.cache.lookup_cache import cache_scope
from enrich.lookup.contract.columnar_answer import ColumnarAnswer, Decode
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.lookup.outcome import ColumnarJoined, JoinedChunk
from enrich.testing import DeferredColumnarFakeSource

pytestmark = pytest.mark.timeout(30)

STRUCT = pa.struct([("value", pa.string())])
DATA = {1: ("one",), 2: ("two",)}


class RecordingSource(DeferredColumnarFakeSource):
    """Records the thread each decode step runs on; ``broken`` makes them raise."""

    def __init__(self, *args: Any, broken: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decoded_on: list[int] = []
        self.broken = broken

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Decode:
        decode = await super().fetch_arrow(keys, struct_type)

        def recorded() -> ColumnarAnswer:
            self.decoded_on.append(threading.get_ident())
            if self.broken:
                raise ValueError("reply cut short")
            answer: ColumnarAnswer = decode()
            return answer

        return recorded


def lane(source: Any, **settings: Any) -> ColumnarLane:
    options: dict[str, Any] = {
        "how": "left",
        "on_error": "error_column",
        "cache": None,
        "timeout": 5.0,
        "capacity": 8,
        "max_batch": 2,
    }
    options.update(settings)
    return ColumnarLane(source, STRUCT, JoinSettings(**options), metrics=JoinMetrics())


def chunks() -> list[tuple[int, pa.Array]]:
    return [(0, pa.array([1, 2, 3, 1], pa.int64())), (1, pa.array([2, None], pa.int64()))]


def test_fetched_answers_are_decoded_on_the_task_thread() -> None:
    source = RecordingSource(DATA)
    run = lane(source)
    out = list(run.run(chunks()))
    assert all(isinstance(j, ColumnarJoined) for j in out)
    values = [j.structs.to_pylist() for j in out if isinstance(j, ColumnarJoined)]
    assert values == [
        [{"value": "one"}, {"value": "two"}, None, {"value": "one"}],
        [{"value": "two"}, None],
    ]
    # Two calls of max_batch 2 for the first chunk, one for the second.
    assert len(source.decoded_on) == 3
    assert set(source.decoded_on) == {threading.get_ident()}


def test_with_a_cache_the_task_thread_decodes_and_the_loop_fills_it() -> None:
    source = RecordingSource(DATA)
    cache = LookupCache(max_rows=10, ttl=60)
    run = lane(source, cache=cache)
    first = list(run.run(chunks()))
    decodes = len(source.decoded_on)
    assert decodes >= 2  # the first chunk's two calls (the second's may hit the cache)
    assert set(source.decoded_on) == {threading.get_ident()}
    store = cache.storage(cache_scope(source))

    async def cached() -> set[Any]:  # read on the loop, after the fills handed to it
        return {key for key, _ in store.entries()}

    assert run_sync(cached) == {1, 2, 3}  # 3: a cached miss
    again = list(run.run(chunks()))  # every key cached now: nothing fetched, same rows
    assert len(source.decoded_on) == decodes
    assert [j.structs.to_pylist() for j in again if isinstance(j, ColumnarJoined)] == [
        j.structs.to_pylist() for j in first if isinstance(j, ColumnarJoined)
    ]


def test_a_chunk_whose_keys_are_all_cached_is_joined_from_the_slab_alone() -> None:
    source = RecordingSource(DATA)
    cache = LookupCache(max_rows=10)
    run = lane(source, cache=cache, how="inner")
    list(run.run([(0, pa.array([1, 2], pa.int64()))]))  # fills the store (run waits)
    asked = list(source.keys_requested)
    out = list(run.run([(1, pa.array([2, None, 1, 2], pa.int64()))]))
    assert source.keys_requested == asked  # nothing asked: the probe alone answers
    joined = out[0]
    assert isinstance(joined, ColumnarJoined)
    assert joined.structs.to_pylist() == [
        {"value": "two"},
        None,
        {"value": "one"},
        {"value": "two"},
    ]
    assert joined.keep is not None and joined.keep.to_pylist() == [True, False, True, True]
    assert (run.metrics.null_keys, run.metrics.rows_out, run.metrics.cache_hits) == (1, 5, 2)


def test_a_decode_step_that_raises_fails_its_keys_as_a_failed_call_does() -> None:
    source = RecordingSource(DATA, broken=True)
    run = lane(source)
    out = list(run.run(chunks()))
    assert all(isinstance(j, JoinedChunk) for j in out)
    first = out[0]
    assert isinstance(first, JoinedChunk)
    assert first.indices == [0, 1, 2, 3]
    assert first.rows == [None] * 4
    assert first.errors is not None
    assert all(e is not None and "reply cut short" in e for e in first.errors)
    assert run.metrics.errors


def test_the_lane_and_the_per_row_join_share_one_cache() -> None:
    data = {1: ("one",), 2: ("two",), 3: [("x",), ("y",)]}
    cache = LookupCache(max_rows=10, ttl=60)
    source = DeferredColumnarFakeSource(data)
    # The per-row join caches 1 (a row), 3 (1:N rows) and 9 (a miss).
    list(lookup_chunks([(0, [1, 3, 9])], source, cache=cache))
    assert source.keys_requested == [1, 3, 9]
    source.data = {1: ("new",)}  # what the store says now; the cache says otherwise
    out = list(lane(source, cache=cache).run([(0, pa.array([9, 1, 3, 2, 1], pa.int64()))]))
    # Only 2 is asked; 1 and 9 and 3's rows come from the cache (3 is 1:N: per row).
    assert source.keys_requested == [1, 3, 9, 2]
    joined = out[0]
    assert isinstance(joined, JoinedChunk)
    assert list(zip(joined.indices, joined.rows, strict=True)) == [
        (0, None),
        (1, ("one",)),
        (2, ("x",)),
        (2, ("y",)),
        (3, None),
        (4, ("one",)),
    ]
    # ... and the per-row join reads the lane's entry for 2 (a miss now).
    again = list(lookup_chunks([(0, [2, 1])], source, cache=cache))
    assert source.keys_requested == [1, 3, 9, 2]
    assert again[0].rows == [None, ("one",)]
    stats = cache.storage(cache_scope(source)).statistics()
    # hits: 3 (lane) + 2 (second per-row run); misses: 3 (first run) + 1 (lane, key 2)
    assert (stats.hits, stats.misses, stats.loads, stats.size) == (5, 4, 4, 4)


def test_the_lane_counts_cache_hits_misses_and_failed_loads() -> None:
    source = DeferredColumnarFakeSource(
        {1: ("one",), 2: LookupFailed("scripted", kind="status:500", retryable=False)}
    )
    cache = LookupCache(max_rows=10, ttl=60)
    run = lane(source, cache=cache, capacity=3)
    keys = [(n, pa.array([1, 2, 3], pa.int64())) for n in range(3)]
    out = list(run.run(keys))
    assert len(out) == 3
    # Chunk 0 asks 1, 2, 3; 1 and the miss 3 are cached, 2 failed and is asked each time.
    assert source.keys_requested == [1, 2, 3, 2, 2]
    assert (run.metrics.cache_hits, run.metrics.cache_misses) == (4, 5)
    stats = cache.storage(cache_scope(source)).statistics()
    assert (stats.hits, stats.misses, stats.loads, stats.load_failures) == (4, 5, 2, 3)


class GatedSource(DeferredColumnarFakeSource):
    """Answers key 1 only once the call for key 9 (which never answers) is out, so the
    lane has admitted chunk 1 before chunk 0 completes, however threads are scheduled."""

    def __init__(self) -> None:
        super().__init__(DATA, never={9})
        self.nine_out = asyncio.Event()

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Decode:
        if 9 in keys.to_pylist():
            self.nine_out.set()
        else:
            await self.nine_out.wait()
        return await super().fetch_arrow(keys, struct_type)


def test_closing_the_lane_cancels_the_calls_still_in_flight() -> None:
    source = GatedSource()
    run = lane(source, timeout=None, max_batch=1)
    out = run.run([(0, pa.array([1], pa.int64())), (1, pa.array([9], pa.int64()))])
    first = next(out)  # chunk 1's call is in flight, and never answers
    assert isinstance(first, ColumnarJoined) and source.in_flight == 1
    out.close()

    async def settled() -> int:
        for _ in range(100):  # the cancellations take a few loop iterations
            if source.in_flight == 0:
                break
            await asyncio.sleep(0)
        return source.in_flight

    assert run_sync(settled, timeout=5) == 0
