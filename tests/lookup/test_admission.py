"""The lane's cache admission: a fixed sample of the key space probed on one large chunk
in STRIDE while the cache is measured cold, every key once the sample hits; the rows
never change, only what the cache is asked and holds."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from enrich import JoinMetrics, LookupCache
from enrich.lookup.join import _scope
from enrich.lookup.lane import admission as admission_module
from enrich.lookup.lane.admission import MIN_KEYS, SAMPLE, STRIDE, Admission, sampled
from enrich.lookup.lane.cache import CacheProbe
from enrich.lookup.lane.columnar import ColumnarAnswer
from enrich.lookup.lane.run import ColumnarJoined, ColumnarLane
from enrich.testing import DeferredColumnarFakeSource

pytestmark = pytest.mark.timeout(60)

STRUCT = pa.struct([("value", pa.int64())])
KEYS = 4 * MIN_KEYS


def chunk(start: int, size: int = KEYS) -> pa.Array:
    return pa.array(range(start, start + size), pa.int64())


def test_the_sample_is_a_fixed_sixteenth_of_any_integer_keys() -> None:
    keys = pa.array(range(0, 3_200_000, 7), pa.int64())
    share = sampled(keys).true_count / len(keys)
    assert abs(share - 1 / SAMPLE) < 0.01
    assert sampled(keys).equals(sampled(keys))  # the same keys every time
    assert sampled(keys.cast(pa.int32())).equals(sampled(keys))


def test_small_chunks_other_keys_and_unknown_rows_probe_every_key() -> None:
    admission = Admission()
    indices = pa.array(range(KEYS), pa.int32())
    assert admission.admit(chunk(0, MIN_KEYS - 1), indices) == (None, None)
    assert admission.admit(pa.array([str(k) for k in range(KEYS)]), indices) == (None, None)
    assert admission.admit(chunk(0), None) == (None, None)


def test_a_cold_admission_samples_one_large_chunk_in_stride(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admission_module, "WINDOW", 10)
    admission = Admission()
    indices = pa.array(range(KEYS), pa.int32())
    decisions = [admission.admit(chunk(0), indices) for _ in range(2 * STRIDE)]
    admitted = [d for d in decisions if d is not None]
    assert len(admitted) == 2  # the others leave the cache alone
    keys, watched = admitted[0]
    assert keys is not None and keys.equals(watched) and keys.equals(sampled(chunk(0)))
    admission.record(9, 10)  # the sample hits: every key, every chunk
    assert admission.full
    for _ in range(STRIDE):
        decision = admission.admit(chunk(0), indices)
        assert decision is not None and decision[0] is None
    admission.record(5, 10)  # below SAMPLE_BELOW: sampling again
    assert not admission.full
    admission.record(7, 10)  # between the two: stays
    assert not admission.full


def test_a_probe_of_admitted_keys_looks_up_and_fills_only_those() -> None:
    store = LookupCache(max_rows=100).storage("test")
    distinct = pa.array([10, 11, 12, 13], pa.int64())
    admitted = pa.array([True, False, True, False])
    store.put_many([12, 13], [(12,), (13,)], 0.0)  # 13 is cached but not admitted
    probe = CacheProbe.of(store, distinct, 0.0, STRUCT, admitted=admitted, watched=admitted)
    assert probe.ask.to_pylist() == [10, 11, 13]
    assert probe.watched == (1, 2)  # 12 hit, 10 missed
    stats = store.statistics()
    assert (stats.hits, stats.misses) == (1, 1)  # 11 and 13 were not looked up
    fetched = ColumnarAnswer(pa.array([{"value": 10}, {"value": 11}, {"value": 13}], STRUCT))
    rows = probe.join_rows(fetched, pa.array([0, 1, 2, 3, None], pa.int32()))
    assert rows is not None
    assert rows.to_pylist() == [{"value": 10}, {"value": 11}, {"value": 12}, {"value": 13}, None]
    probe.fill(store, fetched, 0.0)
    assert [key for key, _ in store.entries()] == [13, 12, 10]  # 11 never enters


def run_lane(source: Any, cache: LookupCache | None, chunks: list[pa.Array]) -> list[Any]:
    lane = ColumnarLane(
        source,
        STRUCT,
        how="left",
        on_error="error_column",
        cache=cache,
        timeout=5.0,
        capacity=KEYS,
        max_batch=KEYS,
        metrics=JoinMetrics(),
    )
    out = []
    for joined in lane.run(enumerate(chunks)):
        assert isinstance(joined, ColumnarJoined)
        out.append(joined.structs.to_pylist())
    return out


def asked(source: DeferredColumnarFakeSource) -> int:
    return len(source.keys_requested)


def test_the_lane_gives_the_same_rows_cold_and_fills_only_the_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admission_module, "WINDOW", 10**9)  # stays cold
    data = {key: (key,) for key in range(2 * KEYS)}
    chunks = [chunk(0), chunk(KEYS // 2), chunk(0), chunk(KEYS // 2)] * 2
    reference = run_lane(DeferredColumnarFakeSource(data), None, chunks)
    cache = LookupCache(max_rows=10 * KEYS, ttl=600)
    source = DeferredColumnarFakeSource(data)
    assert run_lane(source, cache, chunks) == reference
    store = cache.storage(_scope(source))  # type: ignore[arg-type]
    seen = pa.concat_arrays([chunks[STRIDE - 1], chunks[2 * STRIDE - 1]]).unique()
    assert len(store) == sampled(seen).true_count  # the sampled keys of two chunks
    assert asked(source) == sum(map(len, chunks)) - store.statistics().hits


def test_once_the_sample_hits_the_lane_takes_every_key_from_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admission_module, "WINDOW", 1)
    data = {key: (key,) for key in range(KEYS)}
    cache = LookupCache(max_rows=10 * KEYS)  # no TTL: put at 0.0, read at the loop's time
    source = DeferredColumnarFakeSource(data)
    store = cache.storage(_scope(source))  # type: ignore[arg-type]
    store.put_many(list(data), list(data.values()), 0.0)  # a warm cache
    chunks = [chunk(0)] * (STRIDE + 3)
    rows = run_lane(source, cache, chunks)
    assert rows == run_lane(DeferredColumnarFakeSource(data), None, chunks)
    # Asked while sampling: every key of the STRIDE - 1 chunks that left the cache
    # alone, the keys outside the sample of the one that probed it; none once full.
    outside = KEYS - sampled(chunk(0)).true_count
    assert asked(source) == (STRIDE - 1) * KEYS + outside
