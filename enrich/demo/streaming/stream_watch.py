"""What the demo's streaming query is doing, in words: the live line of ``enrich demo``.

The demo watches its query from the driver: the micro-batches that ended (the query's
progress), whether one is running and how many Spark tasks are, and how many rows the
first join's Python workers have taken in so far. :class:`StreamWatch` turns each such
:class:`Observation` into a :class:`Phase`. Until a micro-batch with rows has ended, the
phase names the step the query waits for, and the live line says so (never a bare 0
rows); from then on, rows are shown, and the demo's duration counts from that moment.

A watch reads no clock: each observation carries its time, so a test scripts the
progress and reads the line.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from ...engine.records.call_metrics import JoinMetrics

# Seconds a query has, from its start, to end its first micro-batch with rows (the
# demo's default): on a busy machine Spark's Python workers alone may take a minute.
WAIT_LIMIT = 300.0


class Phase(enum.Enum):
    """Where the query stands. Every phase but ``SHOWING`` is a wait for its first rows."""

    QUERY_START = "query start"  # no micro-batch ended, no task ran yet
    PYTHON_WORKERS = "python workers"  # tasks run; no Python worker has taken a row yet
    FIRST_ROWS = "first rows"  # workers have rows; no micro-batch with rows ended yet
    NO_DATA = "no data"  # micro-batches ended, all of them empty; none is running tasks
    SHOWING = "showing"  # a micro-batch with rows has ended


@dataclass(frozen=True, kw_only=True)
class Batch:
    """One micro-batch that ended, as the query's progress reports it."""

    batch_id: int
    rows: int
    rows_per_second: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Observation:
    """What the driver sees of the query at one moment.

    Attributes:
        at: seconds since the query started.
        batches: micro-batches that ended (the query's recent progress: any window of
            them; a batch seen twice counts once).
        running: a micro-batch is in progress (the query's trigger is active).
        tasks: Spark tasks running now.
        worker_rows: rows the first join's Python workers have taken in so far.
    """

    at: float
    batches: tuple[Batch, ...] = ()
    running: bool = False
    tasks: int = 0
    worker_rows: int = 0


class StreamWatch:
    """Follows one streaming query: its phase, its totals by the progress, its end.

    The query has shown rows for ``duration`` seconds once that long has passed since the
    first observation in which a micro-batch with rows had ended (:meth:`is_done`). Until
    then, if ``wait_limit`` seconds pass since the query started without such a batch,
    the watch gives up (:meth:`has_given_up`), and :meth:`reason` names the step it was
    still waiting for.
    """

    def __init__(self, *, duration: float, wait_limit: float) -> None:
        if duration < 0:
            raise ValueError(f"duration must be >= 0, got {duration}")
        if wait_limit <= 0:
            raise ValueError(f"wait_limit must be > 0, got {wait_limit}")
        self.duration = duration
        self.wait_limit = wait_limit
        self._batches: dict[int, Batch] = {}
        self._seen = Observation(at=0.0)
        self._phase = Phase.QUERY_START
        self._phase_since = 0.0
        self.first_rows_at: float | None = None

    def see(self, observation: Observation) -> Phase:
        """Take in one observation (in time order); the phase it puts the query in."""
        self._note(observation.batches)
        self._seen = observation
        phase = self._phase_of(observation)
        if phase is not self._phase:
            self._phase, self._phase_since = phase, observation.at
        if phase is Phase.SHOWING and self.first_rows_at is None:
            self.first_rows_at = observation.at
        return phase

    def note(self, batches: Iterable[Batch]) -> None:
        """Take in micro-batches that ended (the progress read after the query stopped)."""
        self._note(batches)

    def _note(self, batches: Iterable[Batch]) -> None:
        for batch in batches:
            self._batches[batch.batch_id] = batch

    def _phase_of(self, seen: Observation) -> Phase:
        if self.rows_in:
            return Phase.SHOWING
        if seen.worker_rows:
            return Phase.FIRST_ROWS
        if seen.tasks:
            return Phase.PYTHON_WORKERS
        if self._batches:
            return Phase.NO_DATA
        # No task runs between two of micro-batch 0's: the query has started all the same.
        return Phase.QUERY_START if self._phase is Phase.QUERY_START else self._phase

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def elapsed(self) -> float:
        """Seconds since the query started, as of the last observation."""
        return self._seen.at

    @property
    def rows_in(self) -> int:
        """Rows the ended micro-batches read from the source (the query's progress)."""
        return sum(batch.rows for batch in self._batches.values())

    def ended(self) -> dict[int, int]:
        """The micro-batches that ended: batch id -> rows in, in id order."""
        return {i: self._batches[i].rows for i in sorted(self._batches)}

    def last_batch(self) -> Batch | None:
        return self._batches[max(self._batches)] if self._batches else None

    def next_batch_id(self) -> int:
        """The id of the micro-batch after the last that ended."""
        return max(self._batches) + 1 if self._batches else 0

    def shown_for(self) -> float:
        """Seconds rows have been shown, as of the last observation."""
        if self.first_rows_at is None:
            return 0.0
        return self._seen.at - self.first_rows_at

    def is_done(self) -> bool:
        """Rows have been shown for the whole duration."""
        return self.first_rows_at is not None and self.shown_for() >= self.duration

    def has_given_up(self) -> bool:
        """No micro-batch with rows ended within ``wait_limit`` of the query's start."""
        return self.first_rows_at is None and self._seen.at >= self.wait_limit

    def waiting_for(self) -> str:
        """What the query waits for, in words (empty once rows are shown)."""
        seen, batch = self._seen, self.next_batch_id()
        so_far = f"{seen.at - self._phase_since:.0f} s so far"
        if self._phase is Phase.QUERY_START:
            return f"the query's start: Spark sets up its source and micro-batch 0 ({so_far})"
        if self._phase is Phase.PYTHON_WORKERS:
            tasks = f", {seen.tasks} task{'' if seen.tasks == 1 else 's'}" if seen.tasks else ""
            return f"Spark to start its Python workers (micro-batch {batch}{tasks}; {so_far})"
        if self._phase is Phase.FIRST_ROWS:
            return (
                f"the first micro-batch with rows to end (micro-batch {batch}; its workers "
                f"took in {seen.worker_rows:,} rows; {so_far})"
            )
        if self._phase is Phase.NO_DATA:
            ended = len(self._batches)
            empty = f"{ended} ended empty" if ended > 1 else "micro-batch 0 ended empty"
            return f"the first micro-batch with rows ({empty}; {so_far})"
        return ""

    def reason(self) -> str:
        """Why no rows were shown: the bound, and the step the query was still in."""
        return (
            f"no micro-batch with rows within {self.wait_limit:g} s of the query's start; "
            f"it was still waiting for {self.waiting_for()}"
        )


def live_fields(watch: StreamWatch, users: JoinMetrics, credit: JoinMetrics) -> dict[str, str]:
    """The live line's fields, in order: while the query waits for its first rows,
    what it waits for; then its micro-batches, rows and both joins' numbers."""
    elapsed = f"{watch.elapsed:.0f} s"
    if watch.phase is not Phase.SHOWING:
        return {"elapsed": elapsed, "waiting for": watch.waiting_for()}
    last = watch.last_batch()
    errors = dict(users.errors)
    for reason, count in credit.errors.items():
        errors[reason] = errors.get(reason, 0) + count

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1e3:.1f} ms"

    shown = min(watch.shown_for(), watch.duration)
    return {
        "elapsed": f"{elapsed} (rows shown {shown:.0f} of {watch.duration:g} s)",
        "micro-batches": f"{len(watch.ended()):,}",
        "rows": f"{watch.rows_in:,}",
        "rows/s": f"{last.rows_per_second if last else 0.0:,.0f}",
        "users p50 / p99": f"{ms(users.latency_p50)} / {ms(users.latency_p99)}",
        "credit p50 / p99": f"{ms(credit.latency_p50)} / {ms(credit.latency_p99)}",
        "cache hit ratio": f"{users.cache_hit_ratio:.2f} / {credit.cache_hit_ratio:.2f}",
        "misses": f"{users.misses:,} / {credit.misses:,}",
        "retries": str(users.retries + credit.retries),
        "errors": ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "none",
    }
