"""The store's integer keys in bulk (enrich/lookup/cache/ints.py, the lane's probe and
fill of them): the hash table against a dict model, collisions, recency and expiry, and
the store's two kinds of entries meeting (the per-row join, a 1:N answer)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from enrich import LookupCache
from enrich.lookup.cache.ints import IntKeys
from enrich.lookup.cache.lookup_cache import MISS, CacheStore
from enrich.lookup.contract.columnar_answer import ColumnarAnswer
from enrich.lookup.lane.cache_probe import CacheProbe

pytestmark = pytest.mark.timeout(120)

STRUCT = pa.struct([("name", pa.string()), ("age", pa.int32())])
EDGES = [-(2**63), 2**63 - 1, -1, 0, 1, 2**32, -(2**32)]


def keys(values: Any) -> np.ndarray:
    return np.asarray(values, np.int64)


@pytest.mark.parametrize("expected", [0, 5_000])  # sized on the way, or ahead of need
def test_probes_and_puts_agree_with_a_dict_over_many_random_rounds(expected: int) -> None:
    rng = random.Random(7)
    held = IntKeys(expected)
    model: dict[int, tuple[int, float]] = {}
    for round_ in range(300):
        size = rng.choice([1, 3, 50, 2_000])
        batch = list(
            {
                rng.choice([rng.randrange(-(2**63), 2**63), rng.randrange(5_000)])
                for _ in range(size)
            }
        )
        if round_ % 7 == 0:
            batch = list(set(batch) | set(EDGES))
        now = float(round_)
        if rng.random() < 0.5:
            slots = keys([rng.randrange(10**6) for _ in batch])
            expiry = now + rng.choice([0.5, 3.0, 1e9])
            held.put(keys(batch), slots, expiry)
            model.update(zip(batch, [(slot, expiry) for slot in slots.tolist()], strict=True))
        else:
            got = held.probe(keys(batch), now).tolist()
            want = [model[k][0] if k in model and model[k][1] > now else -1 for k in batch]
            assert got == want, f"round {round_}"
        assert len(held) == len(model)
    assert sorted(held.keys.tolist()) == sorted(model)


def test_keys_that_meet_in_the_table_are_told_apart() -> None:
    held = IntKeys()
    rng = np.random.default_rng(3)
    present = np.unique(rng.integers(-(2**62), 2**62, 60_000))
    rng.shuffle(present)
    for part in np.array_split(present, 7):
        held.put(part, part * 2, float("inf"))
    table_places = held._hash(present)
    assert len(np.unique(table_places)) < len(present)  # collisions happened
    assert held.probe(present, 0.0).tolist() == (present * 2).tolist()
    absent = np.setdiff1d(rng.integers(-(2**62), 2**62, 60_000), present)
    assert (held.probe(absent, 0.0) == -1).all()


def test_a_put_of_a_held_key_updates_it_in_place() -> None:
    held = IntKeys()
    held.put(keys([5, 6]), keys([50, 60]), 10.0)
    held.put(keys([6, 7]), keys([61, 70]), np.array([20.0, 30.0]))
    assert len(held) == 3
    assert held.probe(keys([5, 6, 7]), 15.0).tolist() == [-1, 61, 70]  # 5 expired at 10


def test_eviction_drops_the_least_recently_used_first() -> None:
    held = IntKeys()
    for key in range(100):  # each key its own tick, oldest first
        held.put(keys([key]), keys([key]), float("inf"))
    held.probe(keys([0, 1, 2]), 0.0)  # used again: now the most recent
    left = held.evict(80)
    assert left == 20 + 80 // 8  # down to the limit less an eighth
    kept = set(held.keys.tolist())
    assert {0, 1, 2} <= kept
    assert kept == {0, 1, 2} | set(range(3 + left, 100))
    assert held.probe(keys(sorted(kept)), 0.0).tolist() == sorted(kept)  # table rebuilt
    assert held.evict(1_000) == 0


def store(**options: Any) -> CacheStore:
    return LookupCache(**options).storage("test")


def fill(
    cache: CacheStore, batch: list[int], rows: list[Any], now: float = 0.0, **extra: Any
) -> CacheProbe:
    probe = CacheProbe.of(cache, pa.array(batch, pa.int64()), now, STRUCT)
    probe.fill(cache, ColumnarAnswer(pa.array(rows, STRUCT), **extra), now)
    return probe


def test_the_lane_keeps_integer_keys_in_bulk_and_the_per_row_join_reads_them() -> None:
    cache = store(max_rows=10)
    fill(cache, [1, 2, 3], [{"name": "Ada", "age": 1}, None, None], errors={2: ValueError("x")})
    assert len(cache.ints) == 2 and not cache._entries  # in bulk; the failed key left out
    probe = CacheProbe.of(cache, pa.array([2, 1, 9], pa.int64()), 0.0, STRUCT)
    assert probe.ints and probe.ask.to_pylist() == [9]
    merged = probe.merge(ColumnarAnswer(pa.array([None], STRUCT)), STRUCT)
    assert merged.rows.to_pylist() == [None, {"name": "Ada", "age": 1}, None]
    stats = cache.statistics()
    assert (stats.hits, stats.misses, stats.loads, stats.load_failures, stats.size) == (
        2,
        4,
        2,
        1,
        2,
    )
    CacheProbe.of(cache, pa.array([1], pa.int64()), 0.0, STRUCT)  # 1 used last
    # Read key by key, the entries move over in the order of their last use...
    assert [key for key, _ in cache.entries()] == [2, 1] and not len(cache.ints)
    # ...and the per-row join reads them: a row, a cached miss, an absent key.
    assert cache.get(1, 0.0) == ("Ada", 1)
    assert cache.get(2, 0.0) is MISS
    assert cache.get(3, 0.0) is None


def test_a_1_to_n_answer_moves_the_integer_keys_to_the_entries() -> None:
    cache = store(max_rows=10)
    fill(cache, [1], [{"name": "Ada", "age": 1}])
    fill(cache, [2], [None], multi={0: [("Cy", 1), ("Cy", 2)]})
    assert not len(cache.ints) and len(cache) == 2
    probe = CacheProbe.of(cache, pa.array([1, 2], pa.int64()), 0.0, STRUCT)
    merged = probe.merge(None, STRUCT)
    assert merged.rows.to_pylist() == [{"name": "Ada", "age": 1}, None]
    assert merged.multi == {1: [("Cy", 1), ("Cy", 2)]}


def test_misses_in_bulk_follow_cache_missing_and_ttl_missing() -> None:
    cache = store(max_rows=10, ttl=100, ttl_missing=5)
    fill(cache, [1, 2], [{"name": "Ada", "age": 1}, None], now=0.0)
    assert CacheProbe.of(cache, pa.array([1, 2], pa.int64()), 4.0, STRUCT).hits == 2
    assert CacheProbe.of(cache, pa.array([1, 2], pa.int64()), 6.0, STRUCT).ask.to_pylist() == [2]
    uncached = store(max_rows=10, cache_missing=False)
    fill(uncached, [1, 2], [{"name": "Ada", "age": 1}, None])
    assert uncached.ints.keys.tolist() == [1]


def test_a_full_store_evicts_in_bulk_within_max_rows() -> None:
    cache = store(max_rows=16)
    for start in range(0, 200, 8):
        batch = list(range(start, start + 8))
        fill(cache, batch, [{"name": str(k), "age": k} for k in batch])
        assert len(cache) <= 16
    stats = cache.statistics()
    assert stats.loads == 200 and stats.evictions == 200 - stats.size
    assert CacheProbe.of(cache, pa.array([199, 0], pa.int64()), 0.0, STRUCT).ask.to_pylist() == [0]
