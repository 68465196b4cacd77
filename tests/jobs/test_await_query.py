"""A streaming job returns only when its query stopped without error (no Spark here).

A scripted stand-in for pyspark's ``StreamingQuery`` plays each moment a query can fail:
at the start, in a micro-batch, in the micro-batch still running when ``--duration``
ran out (the query ends failed while the job waits for it), in its stop.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

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
        last_batches: ``lastProgress["batchId"]`` on each read, in turn (the last one
            repeats; none: no progress yet).
        on_first_wait: called in the first ``awaitTermination`` (a signal arriving).
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
        last_batches: tuple[int, ...] = (),
        on_first_wait: Callable[[], None] | None = None,
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
        self._batches: Iterator[int] = iter(last_batches)
        self._last_batch: int | None = None
        self.on_first_wait = on_first_wait

    def awaitTermination(self, timeout: float | None = None) -> bool:
        if self.on_first_wait is not None:
            self.on_first_wait, call = None, self.on_first_wait
            call()
        if timeout is not None and timeout < 0.001:  # pyspark and the JVM refuse it
            raise ValueError(f"timeout must be at least a millisecond, got {timeout}")
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

    @property
    def lastProgress(self) -> dict[str, int] | None:
        self._last_batch = next(self._batches, self._last_batch)
        return None if self._last_batch is None else {"batchId": self._last_batch}

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
    _streams.await_query(ScriptedQuery(ends_within_duration=True), None)
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


def _signal(signum: signal.Signals) -> Callable[[], None]:
    return lambda: os.kill(os.getpid(), signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_query_once_the_batch_in_progress_is_reported(
    signum: signal.Signals,
) -> None:
    """Data always there: the trigger never looks idle, the batch's end shows as a
    progress report after the one seen when the signal came."""
    before = signal.getsignal(signum)
    query = ScriptedQuery(
        trigger_active=(True,) * 1000, last_batches=(7, 7, 8), on_first_wait=_signal(signum)
    )
    _streams.await_query(query, None, grace=3600.0)
    assert query.stops == 1
    assert query._last_batch == 8  # it waited for batch 8's report
    assert signal.getsignal(signum) is before  # the job's own handler is back


def test_a_signal_before_any_progress_stops_once_the_trigger_is_idle() -> None:
    query = ScriptedQuery(trigger_active=(True, True, False), on_first_wait=_signal(signal.SIGTERM))
    _streams.await_query(query, None, grace=3600.0)
    assert query.stops == 1


def test_a_second_signal_stops_at_once() -> None:
    """The first SIGTERM waits for the batch in progress; the second interrupts the
    wait: the query is stopped anyway, and the job sees KeyboardInterrupt."""
    term = _signal(signal.SIGTERM)
    query = ScriptedQuery(trigger_active=(True,) * 1000, last_batches=(3,), on_first_wait=term)
    real_status = ScriptedQuery.status.fget  # type: ignore[attr-defined]

    class Impatient(ScriptedQuery):
        @property
        def status(self) -> dict[str, object]:
            term()  # a second SIGTERM while the job waits for the batch to end
            return real_status(self)  # type: ignore[no-any-return]

    query.__class__ = Impatient
    with pytest.raises(KeyboardInterrupt):
        _streams.await_query(query, None, grace=3600.0)
    assert query.stops == 1
