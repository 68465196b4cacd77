"""A lookup join's metrics as rows of its output, for ``DataFrame.observe``.

Runs in Spark's Python workers and imports no pyspark. Spark Connect has no
accumulators, and a streaming query's progress carries only what ``observe`` aggregates
from the rows flowing through the query. So the join carries its metrics in its output:
one more column, :data:`METRICS_COLUMN`, NULL on every joined row; after its last
output batch a task yields one more row, a copy of its last input row with NULL
dimension columns and the task's counts in that column. :mod:`enrich.spark.metrics.observed` sums
these per micro-batch with ``observe`` and then drops the extra rows and the column, so
the user sees neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ...engine.records.call_metrics import JoinMetrics

__all__ = (
    "METRICS_COLUMN",
    "COUNTERS",
    "LEVELS",
    "METRICS_TYPE",
    "no_metrics",
    "metrics_batch",
    "hits",
    "observed_batches",
    "report",
)

METRICS_COLUMN = "__enrich_metrics"

# The counters carried, in order; "hits" (rows whose key found something) is derived.
COUNTERS = (
    "rows_in",
    "rows_out",
    "hits",
    "misses",
    "null_keys",
    "requests",
    "keys_requested",
    "coalesced",
    "cache_hits",
    "cache_misses",
    "retries",
    "timeouts",
)

# Levels carried, aggregated by their highest value (not summed).
LEVELS = ("peak_in_flight",)

METRICS_TYPE = pa.struct(
    [
        *(pa.field(name, pa.int64()) for name in COUNTERS),
        *(pa.field(name, pa.int64()) for name in LEVELS),
        # Records that ended in an error, by reason ("timeout", "status:503", ...).
        pa.field("errors", pa.map_(pa.string(), pa.int64())),
    ]
)


def hits(metrics: JoinMetrics) -> int:
    """Records whose key found something: neither a miss, a null key nor an error."""
    return metrics.rows_in - metrics.misses - metrics.null_keys - sum(metrics.errors.values())


def no_metrics(rows: int) -> pa.Array:
    """The metrics column of ``rows`` joined rows: all NULL."""
    return pa.nulls(rows, METRICS_TYPE)


def metrics_batch(
    template: pa.RecordBatch, added: list[pa.Field], metrics: JoinMetrics, schema: pa.Schema
) -> pa.RecordBatch:
    """The one-row batch carrying a task's ``metrics``.

    Args:
        template: one input row; its values fill the input columns (a NULL there would
            break a column Spark knows to be non-nullable, even on a row dropped later).
        added: the dimension (and reason) fields the join adds: NULL on this row.
        metrics: what the task's join did.
        schema: the output schema (input fields, added fields, the metrics field).
    """
    values: dict[str, Any] = {name: getattr(metrics, name, 0) for name in (*COUNTERS, *LEVELS)}
    values["hits"] = hits(metrics)
    values["errors"] = sorted(metrics.errors.items())
    arrays = [
        *template.columns,
        *(pa.nulls(1, field.type) for field in added),
        pa.array([values], type=METRICS_TYPE),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# What a task's work turns its input batches into; the run's metrics go to the list.
Work = Callable[[Iterator[pa.RecordBatch], list[JoinMetrics]], Iterator[pa.RecordBatch]]


def observed_batches(
    batches: Iterator[pa.RecordBatch], work: Work, schema: pa.Schema, added: list[pa.Field]
) -> Iterator[pa.RecordBatch]:
    """``work``'s output batches (of ``schema``) with the metrics column, NULL, then the
    row carrying the task's metrics (when its work made some and it saw a row).

    ``added`` are the fields the work appends to its input's (NULL on the metrics row).
    """
    last: list[pa.RecordBatch] = []

    def remembered() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                last[:] = [batch.slice(batch.num_rows - 1, 1)]
            yield batch

    observed = schema.append(pa.field(METRICS_COLUMN, METRICS_TYPE))
    nulls = no_metrics(0)
    done: list[JoinMetrics] = []
    for out in work(remembered(), done):
        if len(nulls) != out.num_rows:  # batches mostly have one size: allocate once
            nulls = no_metrics(out.num_rows)
        yield pa.RecordBatch.from_arrays([*out.columns, nulls], schema=observed)
    if done and last:
        yield metrics_batch(last[0], added, done[0], observed)


def report(
    accumulator: Any, name: str, metrics: JoinMetrics, run: Any = None, stopped: bool = False
) -> None:
    """Add a task's ``metrics`` to ``accumulator`` (a pyspark Accumulator, or anything
    with ``add``; None: nowhere) under ``(name, query id, batch id)``, both None outside
    a streaming query; through ``run`` (:func:`run_of`) when it has one. ``stopped``:
    Spark closed the run's output early, so its accumulator update would never be read:
    the numbers go to the driver's inbox instead."""
    if accumulator is not None:
        query, batch = micro_batch()
        update = {(name, query, batch): metrics}
        if run is None:
            accumulator.add(update)
        elif stopped:
            run.stopped(update)
        else:
            run.done(update)


def run_of(accumulator: Any) -> Any:
    """A task run's reports (:class:`enrich.spark.metrics.inbox.RunReport`), when the
    accumulator comes with the driver's inbox; else None."""
    start = getattr(accumulator, "run", None)
    return start() if callable(start) else None


def progress(run: Any, name: str, *parts: JoinMetrics) -> None:
    """Before an output batch: a snapshot of the run's metrics so far (``parts`` merged)
    to the driver's inbox, so that they reach it even if Spark stops reading here."""
    if run is None:
        return
    merged = JoinMetrics()
    try:
        for part in parts:
            merged.merge(part)
    except RuntimeError:  # a part changed under the copy (the loop counts): next time
        return
    snapshot(run, name, merged)


def snapshot(run: Any, name: str, metrics: JoinMetrics) -> None:
    """:func:`progress` of a copy the caller made (an engine's ``statistics()``)."""
    if run is not None:
        query, batch = micro_batch()
        run.progress({(name, query, batch): metrics})


def micro_batch() -> tuple[str | None, int | None]:
    """The streaming query id and micro-batch id of the running Spark task, if any."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - always there inside Spark
        return None, None
    context = TaskContext.get()
    if context is None:
        return None, None
    query = context.getLocalProperty("sql.streaming.queryId")
    batch = context.getLocalProperty("streaming.sql.batchId")
    return query, int(batch) if batch is not None else None
