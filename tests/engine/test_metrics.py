"""Join metrics add up across processes: merge and pickling keep every counter."""

from __future__ import annotations

import pickle
from dataclasses import fields

import pytest

from enrich import JoinMetrics
from enrich.engine.records.call_metrics import LatencyHistogram, bucket_at_most, bucket_bound

# Levels, not counts: merged processes report the highest.
_LEVELS = ("concurrency_limit", "target_latency", "peak_in_flight")


def test_merge_adds_every_counter_errors_and_latencies() -> None:
    a, b = JoinMetrics(), JoinMetrics()
    for n, f in enumerate(fields(JoinMetrics), start=1):
        if f.name not in ("errors", "latency"):
            setattr(a, f.name, n)
            setattr(b, f.name, 10 * n)
    a.errors["timeout"] = 2
    b.errors["timeout"] = 3
    b.errors["status:503"] = 1
    for seconds in (0.001, 0.002, 0.004):
        a.latency.record(seconds)
    b.latency.record(0.1)
    total = pickle.loads(pickle.dumps(a))
    total.merge(pickle.loads(pickle.dumps(b)))
    for n, f in enumerate(fields(JoinMetrics), start=1):
        if f.name in _LEVELS:
            assert getattr(total, f.name) == 10 * n, f.name
        elif f.name not in ("errors", "latency"):
            assert getattr(total, f.name) == 11 * n, f.name
    assert total.errors == {"timeout": 5, "status:503": 1}
    assert total.latency.total == 4
    assert total.latency.seconds == pytest.approx(0.107)
    assert total.latency_p50 == pytest.approx(0.002, rel=0.1)
    assert total.latency_p99 == pytest.approx(0.1, rel=0.1)


def test_summary_reads_as_one_line() -> None:
    m = JoinMetrics(rows_in=10, rows_out=9, requests=2, keys_requested=8, null_keys=1)
    m.errors["timeout"] = 1
    line = m.summary()
    assert "\n" not in line
    assert "rows 10->9" in line and "4.0 keys each" in line and "timeout=1" in line
    assert "null keys 1" in line


@pytest.mark.parametrize("target", [1e-6, 1e-4, 0.001, 0.0025, 0.1, 1.0, 30.0])
def test_bucket_at_most_is_the_highest_bound_not_above(target: float) -> None:
    bucket = bucket_at_most(target)
    assert bucket_bound(bucket) <= target or bucket == 0
    assert bucket_bound(bucket + 1) > target


def test_cumulative_counts_are_exact_at_every_bound() -> None:
    histogram = LatencyHistogram()
    latencies = [0.0004, 0.001, 0.001, 0.003, 0.2, 7.0]
    for seconds in latencies:
        histogram.record(seconds)
    for target in (0.0005, 0.001, 0.0025, 0.005, 0.25, 10.0):
        bucket = bucket_at_most(target)
        below = sum(1 for seconds in latencies if seconds <= bucket_bound(bucket))
        assert histogram.cumulative(bucket) == below
