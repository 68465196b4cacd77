"""What the ``kafka-eos`` sink counts, gathered on the driver.

:func:`~enrich.spark.register_data_sources` registers the sink with a Spark accumulator
of the user's driver process (as the redis-stream source's counts,
:mod:`enrich.spark.streams.stream_counts`); each task adds what its transactions did, per
target topic. Spark merges the updates of successful task attempts only, so a failed
attempt's aborted transactions are seen in its logs, not here. Over Spark Connect (no
accumulators) the counts are in the executors' logs only.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, fields
from typing import Any

from pyspark.accumulators import AccumulatorParam

Counts = dict[str, dict[str, int]]  # target topic -> {field: count}


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


class _CountsParam(AccumulatorParam):  # type: ignore[type-arg]
    def zero(self, value: Counts) -> Counts:
        return {}

    def addInPlace(self, value1: Counts, value2: Counts) -> Counts:
        merged = {topic: dict(kinds) for topic, kinds in value1.items()}
        for topic, kinds in value2.items():
            into = merged.setdefault(topic, {})
            for kind, n in kinds.items():
                into[kind] = into.get(kind, 0) + n
        return merged


_lock = threading.Lock()
_current: list[Any] = []  # [(SparkContext, accumulator)] of the last registration


def counter_for(spark: Any) -> Any | None:
    """The accumulator of ``spark``'s context (one per context); None over Spark Connect."""
    try:
        context = spark.sparkContext
    except Exception:
        return None
    with _lock:
        if _current and _current[0][0] is context:
            return _current[0][1]
        counter = context.accumulator({}, _CountsParam())
        _current[:] = [(context, counter)]
        return counter


def add(counter: Any | None, topic: str, counts: KafkaSinkCounts) -> None:
    """In a task: add its counts to the driver's accumulator (when there is one)."""
    if counter is not None:
        counter.add({topic: asdict(counts)})


def kafka_sink_statistics(topic: str | None = None) -> KafkaSinkCounts:
    """What the ``kafka-eos`` sink's successful tasks counted since it was registered by
    :func:`~enrich.spark.register_data_sources`: for the sink writing ``topic``, or all."""
    with _lock:
        value: Counts = _current[0][1].value if _current else {}
    total = KafkaSinkCounts()
    for name, kinds in value.items():
        if topic is None or name == topic:
            total = total + KafkaSinkCounts(**kinds)
    return total
