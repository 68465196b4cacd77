"""Counts by name and kind, added up on the driver by a Spark accumulator.

The ``redis-stream`` source (per stream) and the ``kafka-eos`` sink (per target topic)
count what their tasks did this way: :func:`~enrich.spark.register_data_sources` makes
one accumulator for the session's context, the registered reader or writer carries it
into the tasks, each task adds ``{name: {kind: n}}``, and Spark merges the updates of the
task attempts that succeed. Spark Connect has no accumulators: there the counts are in
the executors' logs only.
"""

from __future__ import annotations

import threading
from typing import Any

from pyspark.accumulators import AccumulatorParam

Counts = dict[str, dict[str, int]]  # name -> {kind: count}


class _CountsParam(AccumulatorParam):  # type: ignore[type-arg]
    def zero(self, value: Counts) -> Counts:
        return {}

    def addInPlace(self, value1: Counts, value2: Counts) -> Counts:
        merged = {name: dict(kinds) for name, kinds in value1.items()}
        for name, kinds in value2.items():
            into = merged.setdefault(name, {})
            for kind, n in kinds.items():
                into[kind] = into.get(kind, 0) + n
        return merged


class DriverCounts:
    """One accumulator of :data:`Counts` for the context registered last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: tuple[Any, Any] | None = None  # (SparkContext, accumulator)

    def counter_for(self, spark: Any) -> Any | None:
        """The accumulator of ``spark``'s context (made once per context); None over
        Spark Connect, which has none."""
        try:
            context = spark.sparkContext
        except Exception:  # Spark Connect: no SparkContext, no accumulators
            return None
        with self._lock:
            if self._current is None or self._current[0] is not context:
                self._current = (context, context.accumulator({}, _CountsParam()))
            return self._current[1]

    def value(self) -> Counts:
        """What the finished tasks added so far (empty before any, or unregistered)."""
        with self._lock:
            return self._current[1].value if self._current is not None else {}
