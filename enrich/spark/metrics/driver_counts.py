"""Counts by name and kind, added up on the driver by a Spark accumulator.

The ``redis-stream`` source (per stream) and the ``kafka-eos`` sink (per target topic)
count what their tasks did this way: :func:`~enrich.spark.register_data_sources` makes
one accumulator for the session's context, the registered reader or writer carries it
into the tasks, each task adds ``{name: {kind: n}}``, and Spark merges the updates of the
task attempts that succeed. Spark Connect has no accumulators: there the counts are in
the executors' logs only.

Counts made with a ``family`` are published by the metrics exporter
(:mod:`enrich.spark.metrics.exporter`) as counters ``enrich_<family>_<kind>``, one
series per name, so the exporter needs no import of the rooms that count.
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
    """One accumulator of :data:`Counts` for the context registered last.

    Args:
        family: publish the counts as ``enrich_<family>_<kind>`` counters (None: not
            published).
        kinds: the kinds published (each a counter, 0 where a name has none).
        label: the label naming each series' name (a stream, a topic).
        help: each counter's help text, ``{kind}`` replaced by its kind.
    """

    def __init__(
        self,
        family: str | None = None,
        *,
        kinds: tuple[str, ...] = (),
        label: str = "name",
        help: str = "",
    ) -> None:
        self.family = family
        self.kinds = kinds
        self.label = label
        self.help = help
        self._lock = threading.Lock()
        self._current: tuple[Any, Any] | None = None  # (SparkContext, accumulator)
        if family is not None:
            _published.append(self)

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


_published: list[DriverCounts] = []


def published() -> list[DriverCounts]:
    """The counts made with a ``family``, in the order they were made."""
    return list(_published)
