"""Failed-row warnings are limited per store and minute; the metrics count every row."""

from __future__ import annotations

import logging

import pytest

from enrich import JoinMetrics, SourceUnavailable
from enrich.engine.records.failure import Failed
from enrich.engine.records.log_limit import LogLimit
from enrich.lookup import outcome as joined
from enrich.lookup.outcome import assemble


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_few_lines_per_key_and_window_then_the_count_held_back() -> None:
    clock = Clock()
    limit = LogLimit(lines=2, window=60.0, clock=clock)
    assert [limit.admit("a") for _ in range(5)] == [0, 0, None, None, None]
    assert limit.admit("b") == 0  # another store has its own budget
    clock.now = 59.9
    assert limit.admit("a") is None
    clock.now = 60.0  # a new window: the first line says how many were held back
    assert limit.admit("a") == 4
    assert limit.admit("a") == 0
    assert limit.admit("a") is None
    with pytest.raises(ValueError, match="lines must be >= 1"):
        LogLimit(lines=0)


def test_failed_rows_of_many_batches_log_five_lines_a_minute_per_store(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    monkeypatch.setattr(joined, "FAILED_ROWS", LogLimit(clock=clock))
    error = SourceUnavailable("redis at h:1 is unreachable", kind="connection")
    keys = list(range(10))
    answers = {k: Failed(error) for k in keys}
    totals = JoinMetrics()
    with caplog.at_level(logging.WARNING, logger="enrich.lookup"):
        for _ in range(3):  # three micro-batches: a task and its metrics each
            metrics = JoinMetrics()
            assemble(None, keys, answers, False, "left", "error_column", metrics, store="users")
            totals.merge(metrics)
        assemble(None, keys[:1], answers, False, "left", "null", JoinMetrics(), store="credit")
        clock.now = 61.0
        assemble(None, keys[:1], answers, False, "left", "null", JoinMetrics(), store="users")
    lines = [r.getMessage() for r in caplog.records]
    assert totals.errors == {"connection": 30}  # every row counted
    assert len(lines) == 5 + 1 + 1, lines
    assert lines[-1].endswith("(25 more failed rows not logged)")
    assert all("policy" not in line for line in lines)  # a job names its own policy
