"""Lookup-join metrics in a streaming query's progress, through ``DataFrame.observe``.

The conventional carrier of a query's own metrics, and the one Spark Connect has (it has
no accumulators): each micro-batch's ``StreamingQueryProgress.observedMetrics`` gets an
entry ``enrich.<join name>`` with the join's counters in that batch (rows_in, rows_out,
hits, misses, null_keys, requests, keys_requested, coalesced, cache_hits, cache_misses,
retries, timeouts) and ``errors``, a map from reason to records. The worker's side is
:mod:`enrich.spark.metrics.metric_rows`: a task's counts ride on one extra row of the join's
output, which :func:`observed` sums and then removes.

A name used by two joins of one query (an observation name must be unique in a query)
gets a suffix ``#2``, ``#3``, ...; :func:`observed_statistics` adds such entries up.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType

from ...engine.records.call_metrics import JoinMetrics
from .metric_rows import COUNTERS, LEVELS, METRICS_COLUMN

__all__ = ("PREFIX", "metrics_field", "observed", "observed_statistics", "observed_values")

PREFIX = "enrich."

_lock = threading.Lock()
_used: set[str] = set()
_suffixes = itertools.count(2)

# Sums the tasks' error maps key by key (a map aggregate Spark has not).
_ERRORS = (
    f"aggregate(collect_list(`{METRICS_COLUMN}`.errors), cast(map() as map<string, bigint>), "
    "(total, more) -> map_zip_with(total, more, "
    "(reason, a, b) -> coalesce(a, 0) + coalesce(b, 0)))"
)


def _observation_name(name: str) -> str:
    with _lock:
        observation = PREFIX + name
        while observation in _used:
            observation = f"{PREFIX}{name}#{next(_suffixes)}"
        _used.add(observation)
        return observation


def metrics_field() -> StructField:
    """The Spark field of the metrics column (the Arrow type in ``metrics_rows``)."""
    counters = [StructField(counter, LongType(), nullable=True) for counter in (*COUNTERS, *LEVELS)]
    errors = StructField("errors", MapType(StringType(), LongType()), nullable=True)
    return StructField(METRICS_COLUMN, StructType([*counters, errors]), nullable=True)


def observed(df: DataFrame, name: str) -> DataFrame:
    """``df`` (a join's output with the metrics column and rows) observed under
    ``enrich.<name>``, without the metrics rows and column."""
    F = _functions(df)
    metrics = df[METRICS_COLUMN]
    counters: list[Column] = [
        F.coalesce(F.sum(metrics[counter]), F.lit(0)).alias(counter) for counter in COUNTERS
    ]
    levels = [F.coalesce(F.max(metrics[level]), F.lit(0)).alias(level) for level in LEVELS]
    errors = F.expr(_ERRORS).alias("errors")
    watched = df.observe(_observation_name(name), *counters, *levels, errors)
    return watched.where(metrics.isNull()).drop(METRICS_COLUMN)


def _functions(df: DataFrame) -> Any:
    """The functions module of ``df``'s kind: pyspark picks classic or Spark Connect
    columns by the process's mode, and one process may hold both kinds of session."""
    if type(df).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions

    return functions


def observed_values(progress: Any) -> dict[str, dict[str, Any]]:
    """The observed counters of each lookup join in one micro-batch, by observation
    name (``enrich.<name>``), as plain dicts (``errors`` a dict from reason to records).

    Args:
        progress: a ``StreamingQueryProgress`` (a listener's ``event.progress``,
            ``query.lastProgress`` on Spark 4.x) or its dict/JSON form (``recentProgress``
            entries on classic Spark).
    """
    found = _get(progress, "observedMetrics") or {}
    return {
        observation: _values(row)
        for observation, row in found.items()
        if observation.startswith(PREFIX)
    }


def observed_statistics(progress: Any) -> dict[str, JoinMetrics]:
    """The lookup joins' metrics in one micro-batch, by join name, from its progress
    (see :func:`observed_values`); observations ``name#2``, ... add up under ``name``."""
    joins: dict[str, JoinMetrics] = {}
    for observation, values in observed_values(progress).items():
        name = observation[len(PREFIX) :]
        base, _, suffix = name.rpartition("#")
        if base and suffix.isdigit():
            name = base
        metrics = _metrics(values)
        if name in joins:
            joins[name].merge(metrics)
        else:
            joins[name] = metrics
    return joins


def _get(value: Any, key: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(key)
    return getattr(value, key, None)


def _values(row: Any) -> dict[str, Any]:
    values: dict[str, Any] = row.asDict() if hasattr(row, "asDict") else dict(row)
    if set(values) == {"values", "schema"}:  # Spark Connect's JSON form of a Row
        names = [f["name"] for f in values["schema"]["fields"]]
        values = dict(zip(names, values["values"], strict=True))
    errors = values.get("errors") or {}
    if isinstance(errors, list):  # a map in JSON form may come as key/value pairs
        errors = dict(errors)
    values["errors"] = {str(k): int(v) for k, v in errors.items()}
    return values


def _metrics(values: dict[str, Any]) -> JoinMetrics:
    metrics = JoinMetrics()
    for counter in (*COUNTERS, *LEVELS):
        if counter != "hits":
            setattr(metrics, counter, int(values.get(counter) or 0))
    metrics.errors = Counter(values["errors"])
    return metrics
