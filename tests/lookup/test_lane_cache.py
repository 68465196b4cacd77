"""The lane's cache pieces on a fake clock: rows kept as Arrow in the store's slab, read
back by the lane (one ``take``) and by the per-row join (tuples), the slab compacted
once dead rows pile up, and the store's noted uses bounded."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from enrich import LookupCache
from enrich.lookup.cache.lookup_cache import MISS, CacheStore
from enrich.lookup.contract.columnar_answer import ColumnarAnswer
from enrich.lookup.lane import cache_probe as lane_cache
from enrich.lookup.lane.cache_probe import ArrowSlab, CacheProbe

pytestmark = pytest.mark.timeout(60)

STRUCT = pa.struct([("name", pa.string()), ("age", pa.int32())])


def store(**options: Any) -> CacheStore:
    return LookupCache(**options).storage("test")


def fetched(rows: list[dict[str, Any] | None], **extra: Any) -> ColumnarAnswer:
    return ColumnarAnswer(pa.array(rows, STRUCT), **extra)


def fill(cache: CacheStore, keys: list[int], answer: ColumnarAnswer, now: float = 0.0) -> None:
    probe = CacheProbe.of(cache, pa.array(keys, pa.int64()), now, STRUCT)
    probe.fill(cache, answer, now)


def test_a_fill_keeps_rows_in_the_slab_and_both_readers_see_them() -> None:
    cache = store(max_rows=10)
    answer = fetched(
        [{"name": "Ada", "age": 36}, None, None, None],
        multi={2: [("Cy", 1), ("Cy", 2)]},
        errors={3: ValueError("bad")},
    )
    fill(cache, [1, 2, 3, 4], answer)
    assert isinstance(cache.slab, ArrowSlab)
    assert cache.get(1, 0.0) == ("Ada", 36)  # the per-row join reads a tuple
    assert cache.get(2, 0.0) is MISS
    assert cache.get(3, 0.0) == [("Cy", 1), ("Cy", 2)]
    assert cache.get(4, 0.0) is None  # a failed key is not cached
    probe = CacheProbe.of(cache, pa.array([4, 1, 2, 3], pa.int64()), 0.0, STRUCT)
    assert probe.ask.to_pylist() == [4]
    merged = probe.merge(fetched([{"name": "Dan", "age": 4}]), STRUCT)
    assert merged.rows.to_pylist() == [
        {"name": "Dan", "age": 4},
        {"name": "Ada", "age": 36},
        None,
        None,
    ]
    assert merged.multi == {3: [("Cy", 1), ("Cy", 2)]}


def test_rows_the_per_row_join_cached_are_read_by_the_lane() -> None:
    cache = store(max_rows=10)
    cache.put(7, ("Eve", 7), 0.0)
    fill(cache, [8], fetched([{"name": "Fay", "age": 8}]))
    probe = CacheProbe.of(cache, pa.array([8, 7], pa.int64()), 0.0, STRUCT)
    assert len(probe.ask) == 0
    rows = probe.merge(None, STRUCT).rows.to_pylist()
    assert rows == [{"name": "Fay", "age": 8}, {"name": "Eve", "age": 7}]


def test_the_slab_is_compacted_and_its_rows_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane_cache, "SLAB_SLACK", 4)
    cache = store(max_rows=3)
    for round_ in range(10):  # each fill evicts the last round's keys
        keys = [10 * round_ + k for k in range(3)]
        rows = [{"name": f"n{key}", "age": key} for key in keys]
        fill(cache, keys, fetched(rows))
        slab = cache.slab
        assert isinstance(slab, ArrowSlab)
        assert len(slab) <= 2 * len(cache) + 4 + 3  # dead rows bounded (plus one fill)
    assert [cache.get(k, 0.0) for k in (90, 91, 92)] == [("n90", 90), ("n91", 91), ("n92", 92)]
    probe = CacheProbe.of(cache, pa.array([92, 90], pa.int64()), 0.0, STRUCT)
    assert probe.merge(None, STRUCT).rows.to_pylist() == [
        {"name": "n92", "age": 92},
        {"name": "n90", "age": 90},
    ]


def test_a_probe_keeps_its_hits_through_a_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane_cache, "SLAB_SLACK", 0)
    cache = store(max_rows=2)
    fill(cache, [1, 2], fetched([{"name": "a", "age": 1}, {"name": "b", "age": 2}]))
    probe = CacheProbe.of(cache, pa.array([2, 5], pa.int64()), 0.0, STRUCT)
    for key in (3, 4, 6, 7):  # other chunks' fills: 2 is evicted, the slab compacted
        fill(cache, [key], fetched([{"name": str(key), "age": key}]))
    assert cache.get(2, 0.0) is None
    merged = probe.merge(fetched([{"name": "e", "age": 5}]), STRUCT)
    assert merged.rows.to_pylist() == [{"name": "b", "age": 2}, {"name": "e", "age": 5}]


def test_the_noted_uses_stay_bounded_and_the_order_exact() -> None:
    cache = store(max_rows=3)
    cache.put_many([1, 2, 3], [("1",), ("2",), ("3",)], 0.0)
    for _ in range(5_000):
        cache.get_many([3, 1], 0.0)
        cache.get(2, 0.0)
    assert len(cache._recency) <= 4 * len(cache) + 4096
    cache.get_many([1], 0.0)
    assert [key for key, _ in cache.entries()] == [3, 2, 1]
    cache.put(4, ("4",), 0.0)  # 3 is the least recently used
    assert [key for key, _ in cache.entries()] == [2, 1, 4]


def test_a_probe_of_slab_rows_takes_the_chunks_rows_from_the_slab_at_once() -> None:
    cache = store(max_rows=10)
    fill(cache, [1, 2], fetched([{"name": "Ada", "age": 1}, {"name": "Bob", "age": 2}]))
    probe = CacheProbe.of(cache, pa.array([2, 1], pa.int64()), 0.0, STRUCT)
    assert probe.aligned and probe.hit_rows is None  # nothing taken at the probe
    assert probe.hits == 2 and len(probe.ask) == 0
    indices = pa.array([1, 0, None, 1], pa.int32())  # a chunk's rows: keys 1, 2, null, 1
    rows = probe.join_rows(None, indices)
    assert rows is not None
    assert rows.to_pylist() == [
        {"name": "Ada", "age": 1},
        {"name": "Bob", "age": 2},
        None,
        {"name": "Ada", "age": 1},
    ]
    assert probe.merge(None, STRUCT).rows.to_pylist() == [
        {"name": "Bob", "age": 2},
        {"name": "Ada", "age": 1},
    ]


def test_join_rows_lines_up_fetched_and_cached_rows_and_leaves_errors_to_merge() -> None:
    cache = store(max_rows=10)
    fill(cache, [1, 2], fetched([{"name": "Ada", "age": 1}, {"name": "Bob", "age": 2}]))
    probe = CacheProbe.of(cache, pa.array([2, 5, 1], pa.int64()), 0.0, STRUCT)
    assert not probe.aligned and probe.ask.to_pylist() == [5]
    indices = pa.array([0, 1, 2, None, 1], pa.int32())
    rows = probe.join_rows(fetched([{"name": "Eve", "age": 5}]), indices)
    assert rows is not None
    assert rows.to_pylist() == [
        {"name": "Bob", "age": 2},
        {"name": "Eve", "age": 5},
        {"name": "Ada", "age": 1},
        None,
        {"name": "Eve", "age": 5},
    ]
    failed = fetched([None], errors={0: ValueError("bad")})
    assert probe.join_rows(failed, indices) is None  # not simple: merged, row by row
    assert probe.merge(failed, STRUCT).errors.keys() == {1}


def test_a_probe_of_a_cached_1_to_n_key_is_merged_row_by_row() -> None:
    cache = store(max_rows=10)
    fill(cache, [1, 3], fetched([{"name": "Ada", "age": 1}, None], multi={1: [("x", 1)]}))
    probe = CacheProbe.of(cache, pa.array([3, 1], pa.int64()), 0.0, STRUCT)
    assert not probe.aligned  # a list entry is no slab position
    assert probe.join_rows(None, pa.array([0, 1], pa.int32())) is None
    merged = probe.merge(None, STRUCT)
    assert merged.multi == {0: [("x", 1)]}
    assert merged.rows.to_pylist() == [None, {"name": "Ada", "age": 1}]


def test_a_fill_is_joined_to_the_slab_only_when_a_read_needs_its_rows() -> None:
    slab = ArrowSlab(STRUCT)
    slab.append(pa.array([{"name": f"n{i}", "age": i} for i in range(10_000)], STRUCT))
    column = slab.column()
    assert len(column) == 10_000
    assert slab.append(pa.array([{"name": "new", "age": -1}], STRUCT)) == 10_000
    assert slab.column(10_000) is column  # no row of the fill is needed: no copy
    assert slab.row(10_000) == ("new", -1)  # a read of it joins it
    joined = slab.column(10_001)
    assert len(joined) == 10_001 and joined is not column
    assert column.to_pylist()[-1] == {"name": "n9999", "age": 9999}  # taken columns stay
