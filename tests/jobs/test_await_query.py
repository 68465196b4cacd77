"""A streaming job returns only when its query stopped without error (no Spark here).

A scripted stand-in for pyspark's ``StreamingQuery`` plays each moment a query can fail:
at the start, in a micro-batch, in the micro-batch still running when ``--duration``
ran out (the query ends failed while the job waits for it), in its stop.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs import _streams


class QueryFailed(Exception):
    """Stands in for pyspark's StreamingQueryException."""


class ScriptedQuery:
    """Answers as a StreamingQuery would, one scripted step at a time.

    Args:
        ends_within_duration: what ``awaitTermination(duration)`` returns.
        trigger_active: ``status["isTriggerActive"]`` on each read, in turn (the last
            one repeats); once exhausted with ``ends_failed``, the query has ended.
        ends_failed: the failure the query ends with (None: it ends cleanly).
        failure_at_stop: a failure Spark records as ``stop()`` ends the query.
        stop_raises: what ``stop()`` itself raises.
    """

    def __init__(
        self,
        *,
        ends_within_duration: bool = False,
        await_raises: BaseException | None = None,
        trigger_active: tuple[bool, ...] = (False,),
        ends_failed: BaseException | None = None,
        failure_at_stop: BaseException | None = None,
        stop_raises: BaseException | None = None,
    ) -> None:
        self.ends_within_duration = ends_within_duration
        self.await_raises = await_raises
        self._active_reads: Iterator[bool] = iter(trigger_active)
        self.ends_failed = ends_failed
        self.failure_at_stop = failure_at_stop
        self.stop_raises = stop_raises
        self.isActive = True
        self.stops = 0
        self._exception: BaseException | None = None

    def awaitTermination(self, timeout: float | None = None) -> bool:
        if self.await_raises is not None:
            self.isActive = False
            self._exception = self.await_raises
            raise self.await_raises
        if timeout is None or self.ends_within_duration:
            self.isActive = False
            return True
        return False

    @property
    def status(self) -> dict[str, object]:
        active = next(self._active_reads, None)
        if active is None:  # the batch in progress ended: the query with it, if it failed
            if self.ends_failed is not None:
                self.isActive = False
                self._exception = self.ends_failed
            active = False
        return {"isTriggerActive": active}

    def stop(self) -> None:
        self.stops += 1
        self.isActive = False
        if self.failure_at_stop is not None:
            self._exception = self.failure_at_stop
        if self.stop_raises is not None:
            raise self.stop_raises

    def exception(self) -> BaseException | None:
        return self._exception


def test_a_query_stopped_at_the_end_of_its_duration_without_error_returns() -> None:
    query = ScriptedQuery(trigger_active=(True, True, False))
    _streams.await_query(query, 0.01)
    assert query.stops == 1


def test_a_query_that_ended_by_itself_returns() -> None:
    query = ScriptedQuery(ends_within_duration=True)
    _streams.await_query(query, 5)
    _streams.await_query(ScriptedQuery(), None)
    assert query.stops == 0


def test_a_failure_at_the_start_or_in_a_batch_is_raised() -> None:
    failed = QueryFailed("batch 3 failed")
    with pytest.raises(QueryFailed, match="batch 3"):
        _streams.await_query(ScriptedQuery(await_raises=failed), 5)
    with pytest.raises(QueryFailed, match="batch 3"):
        _streams.await_query(ScriptedQuery(await_raises=failed), None)


def test_a_batch_failing_after_the_duration_ran_out_is_raised() -> None:
    # The known bug: the batch running when the duration ran out failed while the job
    # waited for it to end; the job then found the query inactive and said nothing.
    query = ScriptedQuery(trigger_active=(True, True), ends_failed=QueryFailed("sink: WRONGPASS"))
    with pytest.raises(QueryFailed, match="WRONGPASS"):
        _streams.await_query(query, 0.01)
    assert query.stops == 0


def test_a_failure_recorded_as_the_query_stopped_is_raised() -> None:
    query = ScriptedQuery(failure_at_stop=QueryFailed("last batch failed"))
    with pytest.raises(QueryFailed, match="last batch"):
        _streams.await_query(query, 0.01)
    assert query.stops == 1


def test_a_stop_that_raises_is_raised() -> None:
    query = ScriptedQuery(stop_raises=QueryFailed("stop timed out"))
    with pytest.raises(QueryFailed, match="stop timed out"):
        _streams.await_query(query, 0.01)


def test_the_stop_waits_for_the_batch_in_progress_at_most_its_grace() -> None:
    query = ScriptedQuery(trigger_active=(True,) * 1000)
    _streams.await_query(query, 0.01, grace=0.0)
    assert query.stops == 1
