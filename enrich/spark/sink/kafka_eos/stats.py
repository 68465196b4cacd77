"""What the ``kafka-eos`` sink counts, gathered on the driver.

:func:`~enrich.spark.register_data_sources` registers the sink with a Spark accumulator
of the user's driver process (as the redis-stream source's counts,
:mod:`enrich.spark.metrics.driver_counts`); each task adds what its transactions did, per
target topic. Spark merges the updates of successful task attempts only, so a failed
attempt's aborted transactions are seen in its logs, not here. Over Spark Connect (no
accumulators) the counts are in the executors' logs only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ...metrics.driver_counts import DriverCounts


@dataclass(frozen=True, kw_only=True)
class KafkaSinkCounts:
    """Counts of one task, or of a sink since it was registered.

    Attributes:
        committed: transactions committed (one per source partition a task wrote).
        aborted: transactions aborted and tried again (fenced ones included).
        fenced: producers found fenced by another of the same transactional id (the
            transaction is tried again with a new producer, after reading the marks).
        records: records written in committed transactions.
        skipped: rows at or below their source partition's mark (written before: a
            replayed or re-cut batch); they need no transaction.
    """

    committed: int = 0
    aborted: int = 0
    fenced: int = 0
    records: int = 0
    skipped: int = 0

    def __add__(self, other: KafkaSinkCounts) -> KafkaSinkCounts:
        return KafkaSinkCounts(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def summary(self) -> str:
        return (
            f"{self.records:,} records in {self.committed:,} transactions "
            f"({self.aborted} aborted, {self.fenced} fenced), {self.skipped:,} rows "
            "skipped as written before"
        )


_counts = DriverCounts()
counter_for = _counts.counter_for


def add(counter: Any | None, topic: str, counts: KafkaSinkCounts) -> None:
    """In a task: add its counts to the driver's accumulator (when there is one)."""
    if counter is not None:
        counter.add({topic: asdict(counts)})


def kafka_sink_statistics(topic: str | None = None) -> KafkaSinkCounts:
    """What the ``kafka-eos`` sink's successful tasks counted since it was registered by
    :func:`~enrich.spark.register_data_sources`: for the sink writing ``topic``, or all."""
    total = KafkaSinkCounts()
    for name, kinds in _counts.value().items():
        if topic is None or name == topic:
            total = total + KafkaSinkCounts(**kinds)
    return total
