"""The demo's live line, from scripted progress: what it waits for, then its rows."""

from __future__ import annotations

import pytest

from enrich.demo.streaming.stream_watch import (
    Batch,
    Observation,
    Phase,
    StreamWatch,
    live_fields,
)
from enrich.engine.records.call_metrics import JoinMetrics

EMPTY_0 = Batch(batch_id=0, rows=0)
ROWS_1 = Batch(batch_id=1, rows=3_000, rows_per_second=400.0)
ROWS_2 = Batch(batch_id=2, rows=8_000, rows_per_second=5_300.0)


def line(watch: StreamWatch) -> str:
    fields = live_fields(watch, JoinMetrics(), JoinMetrics())
    return "  ".join(f"{k} {v}" for k, v in fields.items())


def watch(duration: float = 20.0, wait_limit: float = 300.0) -> StreamWatch:
    return StreamWatch(duration=duration, wait_limit=wait_limit)


def test_before_any_task_the_line_waits_for_the_query_start() -> None:
    w = watch()
    assert w.see(Observation(at=0.0, running=True)) is Phase.QUERY_START
    assert w.see(Observation(at=3.0, running=True)) is Phase.QUERY_START
    assert line(w) == (
        "elapsed 3 s  waiting for the query's start: Spark sets up its source and "
        "micro-batch 0 (3 s so far)"
    )


def test_tasks_without_rows_in_the_workers_wait_for_the_python_workers() -> None:
    w = watch()
    w.see(Observation(at=2.0, running=True))
    assert w.see(Observation(at=4.0, running=True, tasks=2)) is Phase.PYTHON_WORKERS
    w.see(Observation(at=10.0, running=True, tasks=2))
    assert line(w) == (
        "elapsed 10 s  waiting for Spark to start its Python workers "
        "(micro-batch 0, 2 tasks; 6 s so far)"
    )


def test_between_two_tasks_of_the_first_batch_the_query_has_still_started() -> None:
    w = watch()
    w.see(Observation(at=1.0, running=True))
    w.see(Observation(at=4.0, running=True, tasks=1))
    assert w.see(Observation(at=6.0, running=True)) is Phase.PYTHON_WORKERS
    assert line(w) == (
        "elapsed 6 s  waiting for Spark to start its Python workers (micro-batch 0; 2 s so far)"
    )


def test_rows_in_the_workers_wait_for_the_first_batch_with_rows_to_end() -> None:
    w = watch()
    w.see(Observation(at=4.0, batches=(EMPTY_0,), running=True, tasks=1))
    phase = w.see(Observation(at=9.0, batches=(EMPTY_0,), running=True, tasks=2, worker_rows=1500))
    assert phase is Phase.FIRST_ROWS
    w.see(Observation(at=11.0, batches=(EMPTY_0,), running=True, tasks=1, worker_rows=3000))
    assert line(w) == (
        "elapsed 11 s  waiting for the first micro-batch with rows to end (micro-batch 1; "
        "its workers took in 3,000 rows; 2 s so far)"
    )


def test_empty_batches_wait_for_the_first_batch_with_rows() -> None:
    w = watch()
    assert w.see(Observation(at=5.0, batches=(EMPTY_0,))) is Phase.NO_DATA
    assert "micro-batch 0 ended empty" in line(w)
    w.see(Observation(at=7.0, batches=(EMPTY_0, Batch(batch_id=1, rows=0)), running=True))
    assert line(w) == (
        "elapsed 7 s  waiting for the first micro-batch with rows (2 ended empty; 2 s so far)"
    )


def test_no_waiting_line_shows_a_count_of_rows() -> None:
    w = watch()
    script = [
        Observation(at=0.0, running=True),
        Observation(at=3.0, running=True, tasks=1),
        Observation(at=5.0, batches=(EMPTY_0,)),
        Observation(at=6.0, batches=(EMPTY_0,), running=True, tasks=2),
        Observation(at=12.0, batches=(EMPTY_0,), running=True, tasks=2, worker_rows=900),
    ]
    for seen in script:
        assert w.see(seen) is not Phase.SHOWING
        shown = live_fields(w, JoinMetrics(), JoinMetrics())
        assert list(shown) == ["elapsed", "waiting for"], shown
        assert "rows 0" not in line(w)
    assert w.first_rows_at is None and not w.is_done()


def test_rows_are_shown_for_the_duration_from_the_first_batch_with_rows() -> None:
    w = watch(duration=20.0)
    w.see(Observation(at=5.0, batches=(EMPTY_0,)))
    assert w.see(Observation(at=15.0, batches=(EMPTY_0, ROWS_1))) is Phase.SHOWING
    assert w.first_rows_at == 15.0
    w.see(Observation(at=25.0, batches=(ROWS_1, ROWS_2), running=True))
    assert not w.is_done()
    assert line(w).startswith(
        "elapsed 25 s (rows shown 10 of 20 s)  micro-batches 3  rows 11,000  rows/s 5,300"
    )
    w.see(Observation(at=35.0, batches=(ROWS_2,)))
    assert w.is_done() and not w.has_given_up()
    assert w.ended() == {0: 0, 1: 3_000, 2: 8_000}  # a window of the progress counts once
    assert w.rows_in == 11_000


def test_the_wait_limit_gives_up_and_names_the_step_still_awaited() -> None:
    w = watch(wait_limit=60.0)
    w.see(Observation(at=30.0, running=True, tasks=2))
    assert not w.has_given_up()
    w.see(Observation(at=60.0, running=True, tasks=2))
    assert w.has_given_up() and not w.is_done()
    assert w.reason() == (
        "no micro-batch with rows within 60 s of the query's start; it was still waiting "
        "for Spark to start its Python workers (micro-batch 0, 2 tasks; 30 s so far)"
    )


def test_once_rows_are_shown_the_wait_limit_no_longer_applies() -> None:
    w = watch(duration=600.0, wait_limit=60.0)
    w.see(Observation(at=50.0, batches=(ROWS_1,)))
    w.see(Observation(at=500.0, batches=(ROWS_1,)))
    assert not w.has_given_up() and not w.is_done()


def test_settings_are_checked_once() -> None:
    with pytest.raises(ValueError, match="wait_limit must be > 0, got 0"):
        StreamWatch(duration=1.0, wait_limit=0)
    with pytest.raises(ValueError, match="duration must be >= 0, got -1"):
        StreamWatch(duration=-1, wait_limit=1.0)
