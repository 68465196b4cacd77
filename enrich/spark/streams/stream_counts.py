"""What the ``redis-stream`` source's tasks counted, gathered on the driver.

:func:`~enrich.spark.register_data_sources` registers the source with a Spark
accumulator of the user's driver process; each task that reads a stream adds its counts
once, when its partition is read. :func:`stream_statistics` reads the totals there (the
batch reader and streaming queries alike). A source registered another way (by
``spark.dataSource.register`` directly, or over Spark Connect, which has no accumulators)
counts in its executors' logs only. A retried task counts again (as any accumulator
updated in a transformation).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from pyspark.accumulators import AccumulatorParam

Counts = dict[str, dict[str, int]]  # stream -> {kind: count}

KINDS = ("entries", "malformed", "dropped", "lost")


@dataclass(frozen=True)
class StreamReadCounts:
    """Totals for one stream since the source was registered.

    Attributes:
        entries: entries read (dropped ones included).
        malformed: entries with a field that did not parse as its column's type (in
            every mode: kept with nulls in ``PERMISSIVE``, dropped in ``DROPMALFORMED``).
        dropped: entries left out by ``mode=DROPMALFORMED``.
        lost: times a task found entries of its range gone when it began to read them
            (``failOnDataLoss=false``; losses found when a batch is planned are counted
            in the query's offsets instead, see docs/data-sources.md).
    """

    entries: int = 0
    malformed: int = 0
    dropped: int = 0
    lost: int = 0


class _CountsParam(AccumulatorParam):  # type: ignore[type-arg]
    def zero(self, value: Counts) -> Counts:
        return {}

    def addInPlace(self, value1: Counts, value2: Counts) -> Counts:
        merged = {stream: dict(kinds) for stream, kinds in value1.items()}
        for stream, kinds in value2.items():
            into = merged.setdefault(stream, {})
            for kind, n in kinds.items():
                into[kind] = into.get(kind, 0) + n
        return merged


_lock = threading.Lock()
_current: list[Any] = []  # [(SparkContext, accumulator)] of the last registration


def counter_for(spark: Any) -> Any | None:
    """The accumulator of ``spark``'s context (made once per context); None over Spark
    Connect, which has none."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext, no accumulators
        return None
    with _lock:
        if _current and _current[0][0] is context:
            return _current[0][1]
        counter = context.accumulator({}, _CountsParam())
        _current[:] = [(context, counter)]
        return counter


def stream_statistics() -> dict[str, StreamReadCounts]:
    """Per stream, what the ``redis-stream`` source's finished tasks counted so far (empty
    before any read, and when the source was not registered by
    :func:`~enrich.spark.register_data_sources`)."""
    with _lock:
        value: Counts = _current[0][1].value if _current else {}
    return {
        stream: StreamReadCounts(**{k: v for k, v in kinds.items() if k in KINDS})
        for stream, kinds in sorted(value.items())
    }
