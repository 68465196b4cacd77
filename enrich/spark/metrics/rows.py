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

from typing import Any

import pyarrow as pa

from ...lookup.metrics import JoinMetrics

__all__ = ("METRICS_COLUMN", "COUNTERS", "METRICS_TYPE", "no_metrics", "metrics_batch", "hits")

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

METRICS_TYPE = pa.struct(
    [
        *(pa.field(name, pa.int64()) for name in COUNTERS),
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
    values: dict[str, Any] = {name: getattr(metrics, name, 0) for name in COUNTERS}
    values["hits"] = hits(metrics)
    values["errors"] = sorted(metrics.errors.items())
    arrays = [
        *template.columns,
        *(pa.nulls(1, field.type) for field in added),
        pa.array([values], type=METRICS_TYPE),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
