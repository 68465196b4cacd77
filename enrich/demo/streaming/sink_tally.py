"""The sink of the demo's streaming query: each micro-batch counted by case.

:class:`SinkTally` is the query's ``foreachBatch`` function. It reads each micro-batch
once (one aggregate, so each row's lookups run once), counts its rows by :data:`CASES`
(which split every row into exactly one case) and keeps the first row of each case as
the demo's sample. :meth:`SinkTally.totals` sums the micro-batches the query's progress
reports as ended, so its rows in (the progress) and its cases (the sink) count the same
batches and agree: a batch that a stop cut short after its write and before its
progress is in neither.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """A kind of output row: its name in the totals, its sample's label, its SQL test."""

    name: str
    label: str
    where: str


CASES = (
    Case("enriched", "hit", "enrich_error IS NULL AND name IS NOT NULL"),
    Case(
        "unknown user",
        "miss: no such user",
        "enrich_error IS NULL AND name IS NULL AND user_id IS NOT NULL",
    ),
    Case("null key", "null key: no lookup", "enrich_error IS NULL AND user_id IS NULL"),
    Case("dead letter", "error policy: bad value", "enrich_error IS NOT NULL"),
)
SAMPLE_COLUMNS = ("order_id", "user_id", "amount", "name", "tier", "credit", "enrich_error")


@dataclass(frozen=True, kw_only=True)
class Totals:
    """What the query did over its ended micro-batches.

    Attributes:
        batches: micro-batches counted.
        rows_in: rows they read from the source (the query's progress).
        sink_rows: rows the sink received for them.
        enriched, unknown_users, null_keys, dead_letters: those rows by case (a user
            found; no such user; a null key, no lookup; the error policy's rows, the
            reason in ``enrich_error``).
        cut_short: micro-batches whose count the stop cancelled (Ctrl-C cancels
            Spark's jobs): left out of every figure above.
    """

    batches: int
    rows_in: int
    sink_rows: int
    enriched: int
    unknown_users: int
    null_keys: int
    dead_letters: int
    cut_short: int = 0

    @property
    def misses(self) -> int:
        return self.unknown_users + self.null_keys

    def agree(self) -> bool:
        """The sink received every row the source gave, each in one case."""
        cases = self.enriched + self.misses + self.dead_letters
        return self.rows_in == self.sink_rows == cases

    def lines(self) -> list[str]:
        """The totals, as the demo prints them (the first line holds the numbers)."""
        over = f"{self.batches:,} micro-batch{'' if self.batches == 1 else 'es'}"
        cases = (
            f"enriched {self.enriched:,} + misses {self.misses:,} "
            f"+ dead letters {self.dead_letters:,}"
        )
        if self.agree():
            first = f"totals: rows in {self.rows_in:,} = {cases} ({over})"
        else:
            first = (
                f"totals: rows in {self.rows_in:,}, but the sink received "
                f"{self.sink_rows:,} ({cases}) over {over}: they differ"
            )
        cut = (
            [f"  {self.cut_short} micro-batch(es) cut short by the stop: counted nowhere"]
            if self.cut_short
            else []
        )
        return [
            first,
            *cut,
            "  rows in: the query's progress; the rest: what the sink received",
            f"  misses: {self.null_keys:,} null keys (no lookup), "
            f"{self.unknown_users:,} unknown users",
            "  dead letters: rows under the error policy (their reason in enrich_error)",
        ]


class SinkTally:
    """Counts each micro-batch by case and keeps a sample row per case.

    Spark calls it on the driver, from a thread of its own, once per micro-batch (again
    for a replayed one: the last count of a batch id stands); readers on other threads
    see whole batches only.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[int, dict[str, int]] = {}
        self._samples: dict[str, dict[str, Any]] = {}
        self._stopping = threading.Event()
        self._cut: set[int] = set()  # batch ids whose count the stop cancelled

    def stopping(self) -> None:
        """The query is being stopped: a micro-batch the stop cancels mid-count ends
        quietly (it reports no progress and counts nowhere) instead of failing with a
        stack trace Spark would print."""
        self._stopping.set()

    def __call__(self, batch: Any, batch_id: int) -> None:
        try:
            self._count(batch, batch_id)
        except Exception as failed:
            # Ctrl-C makes pyspark cancel every job at once, before the demo's stop
            # begins: a count cancelled so is the stop's too.
            if not (self._stopping.is_set() or "SPARK_JOB_CANCELLED" in str(failed)):
                raise
            with self._lock:
                self._cut.add(batch_id)

    def _count(self, batch: Any, batch_id: int) -> None:
        columns = ", ".join(SAMPLE_COLUMNS)
        aggregates = ["count(1) AS rows"]
        for i, case in enumerate(CASES):
            aggregates.append(f"count_if({case.where}) AS n{i}")
            aggregates.append(
                f"first(CASE WHEN {case.where} THEN struct({columns}) END, true) AS s{i}"
            )
        row = batch.selectExpr(*aggregates).collect()[0]
        counts = {"rows": int(row["rows"])}
        samples = {}
        for i, case in enumerate(CASES):
            counts[case.name] = int(row[f"n{i}"])
            if row[f"s{i}"] is not None:
                samples[case.label] = row[f"s{i}"].asDict()
        self.record(batch_id, counts, samples)

    def record(
        self, batch_id: int, counts: Mapping[str, int], samples: Mapping[str, dict[str, Any]]
    ) -> None:
        """File one micro-batch: its ``rows`` and its count of each case by name, and
        sample rows by case label (the first one kept for each label)."""
        with self._lock:
            self._counts[batch_id] = dict(counts)
            for label, sample in samples.items():
                self._samples.setdefault(label, sample)

    def samples(self) -> dict[str, dict[str, Any]]:
        """The first row the sink received of each case, by case label."""
        with self._lock:
            return dict(self._samples)

    def totals(self, ended: Mapping[int, int]) -> Totals:
        """The totals over the micro-batches in ``ended`` (batch id -> rows in, from the
        query's progress)."""
        with self._lock:
            cut = [batch_id for batch_id in ended if batch_id in self._cut]
            ended = {b: rows for b, rows in ended.items() if b not in self._cut}
            counted = [self._counts.get(batch_id, {}) for batch_id in ended]
        names = {case.name: sum(c.get(case.name, 0) for c in counted) for case in CASES}
        return Totals(
            batches=len(ended),
            rows_in=sum(ended.values()),
            sink_rows=sum(c.get("rows", 0) for c in counted),
            enriched=names["enriched"],
            unknown_users=names["unknown user"],
            null_keys=names["null key"],
            dead_letters=names["dead letter"],
            cut_short=len(cut),
        )
