"""``kafka-eos``: a Spark sink writing to Kafka exactly once, keyed by the source record
(Flink's transactional Kafka sink and Kafka Streams' ``exactly_once_v2``, on Spark's
replays).

- :mod:`.data_source`: the data source and its writers.
- :mod:`.transaction`: one source partition's rows and mark in one Kafka transaction.
- :mod:`.source`: source partitions, marks, transactional ids (pure).
- :mod:`.marks`: the marks topic (created, read back ``read_committed``).
- :mod:`.query`: the query-shape checks and :func:`kafka_eos_writer`.
- :mod:`.settings`, :mod:`.errors`, :mod:`.stats`.

Needs confluent-kafka (``pip install 'spark-enrich[kafka]'``) on the driver and the
executors. See docs/data-sources.md, "exactly once into Kafka".
"""

from __future__ import annotations

from ...._lazy import loader as _loader
from .eos_errors import (
    KafkaSinkRefused as KafkaSinkRefused,
    MissingOption as MissingOption,
    ProducerFenced as ProducerFenced,
    SourceNotKeyed as SourceNotKeyed,
    SourcePartitionSplit as SourcePartitionSplit,
    StatefulQuery as StatefulQuery,
    TransactionFailed as TransactionFailed,
)
from .stats import (
    KafkaSinkCounts as KafkaSinkCounts,
    kafka_sink_statistics as kafka_sink_statistics,
)

__all__ = (
    "KafkaSinkCounts",
    "KafkaSinkRefused",
    "MissingOption",
    "ProducerFenced",
    "SourceNotKeyed",
    "SourcePartitionSplit",
    "StatefulQuery",
    "TransactionFailed",
    "kafka_eos_writer",
    "kafka_sink_statistics",
)


# Loaded on first use: the query side imports pyspark's streaming classes.
_LAZY: dict[str, str] = {"kafka_eos_writer": ".query"}
__getattr__ = _loader(__name__, _LAZY, globals())
