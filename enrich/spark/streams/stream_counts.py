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

from dataclasses import dataclass

from ..metrics.driver_counts import DriverCounts

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


_counts = DriverCounts(
    "stream",
    kinds=KINDS,
    label="stream",
    help="The redis-stream source's {kind} entries, per stream.",
)
counter_for = _counts.counter_for


def stream_statistics() -> dict[str, StreamReadCounts]:
    """Per stream, what the ``redis-stream`` source's finished tasks counted so far (empty
    before any read, and when the source was not registered by
    :func:`~enrich.spark.register_data_sources`)."""
    return {
        stream: StreamReadCounts(**{k: v for k, v in kinds.items() if k in KINDS})
        for stream, kinds in sorted(_counts.value().items())
    }
