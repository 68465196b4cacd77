"""The demo's sink counts: totals over the batches the progress reports as ended."""

from __future__ import annotations

import re

import pytest

from enrich.demo.streaming.sink_tally import CASES, SinkTally

COUNTS_3 = {"rows": 100, "enriched": 85, "unknown user": 5, "null key": 5, "dead letter": 5}


def test_totals_agree_with_the_progress_and_say_so_in_one_line() -> None:
    tally = SinkTally()
    tally.record(0, {"rows": 0}, {})
    tally.record(1, COUNTS_3, {})
    tally.record(2, COUNTS_3, {})
    totals = tally.totals({0: 0, 1: 100, 2: 100})
    assert totals.agree()
    assert (totals.rows_in, totals.sink_rows, totals.enriched) == (200, 200, 170)
    assert (totals.misses, totals.dead_letters) == (20, 10)
    first = totals.lines()[0]
    assert (
        first
        == "totals: rows in 200 = enriched 170 + misses 20 + dead letters 10 (3 micro-batches)"
    )
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", first)]
    assert numbers[0] == sum(numbers[1:4])


def test_a_batch_without_progress_counts_nowhere() -> None:
    # A stop cut it short after its write: its rows were never reported as read.
    tally = SinkTally()
    tally.record(1, COUNTS_3, {})
    tally.record(2, COUNTS_3, {})
    totals = tally.totals({1: 100})
    assert totals.agree() and totals.sink_rows == 100 and totals.batches == 1


def test_totals_that_differ_say_so() -> None:
    tally = SinkTally()
    tally.record(1, COUNTS_3, {})
    totals = tally.totals({1: 100, 2: 40})  # batch 2 reported rows the sink never saw
    assert not totals.agree()
    assert totals.lines()[0] == (
        "totals: rows in 140, but the sink received 100 (enriched 85 + misses 10 "
        "+ dead letters 5) over 2 micro-batches: they differ"
    )


def test_the_first_row_of_each_case_is_the_sample() -> None:
    tally = SinkTally()
    tally.record(1, COUNTS_3, {"hit": {"order_id": 1}})
    tally.record(2, COUNTS_3, {"hit": {"order_id": 2}, "null key: no lookup": {"order_id": 9}})
    assert tally.samples() == {"hit": {"order_id": 1}, "null key: no lookup": {"order_id": 9}}


def test_the_cases_split_every_row_once() -> None:
    names = [case.name for case in CASES]
    assert names == ["enriched", "unknown user", "null key", "dead letter"]
    assert len({case.label for case in CASES}) == len(CASES)


class _CancelledBatch:
    """A micro-batch whose count fails: by default as Spark's cancellation of all jobs
    (Ctrl-C, a stop) does."""

    def __init__(self, error: str = "[SPARK_JOB_CANCELLED] Job 5 cancelled") -> None:
        self.error = error

    def selectExpr(self, *columns: str) -> _CancelledBatch:
        return self

    def collect(self) -> list[object]:
        raise RuntimeError(self.error)


def test_a_batch_cut_short_by_the_stop_ends_quietly_and_counts_nowhere() -> None:
    tally = SinkTally()
    with pytest.raises(RuntimeError, match="disk full"):  # not stopping: a real failure
        tally(_CancelledBatch("disk full"), 3)
    tally.stopping()
    tally(_CancelledBatch("disk full"), 3)  # the stop's: no stack trace for Spark to print
    tally.record(2, COUNTS_3, {})
    totals = tally.totals({2: 100, 3: 100})  # Spark reports batch 3 as ended: left out
    assert totals.agree() and (totals.rows_in, totals.cut_short) == (100, 1)
    assert "1 micro-batch(es) cut short by the stop" in totals.lines()[1]


def test_a_count_cancelled_by_ctrl_c_before_the_stop_begins_is_the_stops_too() -> None:
    tally = SinkTally()  # pyspark's SIGINT handler cancels every job at once
    tally(_CancelledBatch(), 4)
    assert tally.totals({4: 50}).cut_short == 1
