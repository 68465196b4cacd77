"""The ``kafka-eos`` data source: a Spark sink writing each source record's rows to a
Kafka topic exactly once, for ``read_committed`` consumers.

Each task gathers its rows per source partition, then writes each partition's rows
above the partition's mark in one Kafka transaction that also moves the mark
(:mod:`~enrich.spark.sink.kafka_eos.transaction`). Nothing is left for the driver to
publish: its ``commit`` adds up the tasks' counts and checks that no source partition
was split over several tasks; its ``abort`` has nothing to undo (a task's committed
transactions stay, and the batch's replay skips their rows by their marks).

So the sink does not depend on batch ids: a batch replayed with the same rows, or re-cut
(async progress tracking, a changed ``maxOffsetsPerTrigger`` after a restart) writes
each record once. See :mod:`~enrich.spark.sink.kafka_eos.settings` for the options.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from .. import hooks
from ..kafka_config import masked
from . import marks, stats
from .eos_errors import KafkaSinkRefused, SourcePartitionSplit, StatefulQuery
from .settings import KafkaSinkSettings
from .source import SourceColumns, resolve, split
from .stats import KafkaSinkCounts
from .transaction import write_source

log = logging.getLogger("enrich.spark.sink.kafka_eos")

NAME = "kafka-eos"


@dataclass
class WrittenPart(WriterCommitMessage):
    """What a task wrote: its counts, and the source partitions it held."""

    counts: KafkaSinkCounts
    sources: list[str] = field(default_factory=list)


def _batch_id() -> Any:
    from pyspark import TaskContext

    context = TaskContext.get()
    return None if context is None else context.getLocalProperty("streaming.sql.batchId")


class _KafkaWriter:
    """The executor half (``write``) and the driver's checks and counts."""

    def __init__(
        self, settings: KafkaSinkSettings, columns: SourceColumns, counter: Any = None
    ) -> None:
        self.settings = settings
        self.columns = columns
        self.counter = counter  # the driver's accumulator (stats), pickled with the writer

    def write(self, iterator: Iterator[Any]) -> WrittenPart:
        batch_id = _batch_id()
        hooks.pause_if_asked("kafka_before_write", batch_id)
        gathered: dict[str, list[pa.RecordBatch]] = {}
        for item in iterator:
            if not isinstance(item, pa.RecordBatch):  # a caller passing Rows
                raise TypeError("the kafka-eos sink's writer takes Arrow record batches")
            for source, rows in split(item, self.columns).items():
                gathered.setdefault(source, []).append(rows)
        counts = KafkaSinkCounts()
        for source, batches in gathered.items():
            counts += write_source(
                self.settings,
                self.columns,
                source,
                batches,
                batch_id,
                lambda point: hooks.pause_if_asked(f"kafka_{point}", batch_id),
            )
        stats.add(self.counter, self.settings.topic, counts)
        return WrittenPart(counts, sorted(gathered))

    def _commit(self, messages: list[Any], batch: Any) -> None:
        parts = [m for m in messages if isinstance(m, WrittenPart)]
        seen: dict[str, int] = {}
        for part in parts:
            for source in part.sources:
                seen[source] = seen.get(source, 0) + 1
        split_ = sorted(s for s, n in seen.items() if n > 1)
        total = KafkaSinkCounts()
        for part in parts:
            total += part.counts
        if split_:
            raise SourcePartitionSplit(
                f"kafka-eos sink: batch {batch}: source partition(s) {', '.join(split_)} "
                "were written by several tasks each, which the sink cannot keep exactly "
                "once (each source partition has one mark and one transactional id). "
                "Their transactions are committed: records of them may be lost. Read "
                "each source partition in one task: no repartition or shuffle before "
                "the sink, Kafka's minPartitions/maxRecordsPerPartition unset, "
                "redis-stream's partitionsPerStream=1",
                split_[0],
            )
        log.info("kafka-eos sink %s: batch %s: %s", self.settings.topic, batch, total.summary())

    def _abort(self, messages: list[Any], batch: Any) -> None:
        parts = [m for m in messages if isinstance(m, WrittenPart)]
        done = sum(p.counts.committed for p in parts)
        if done:
            log.warning(
                "kafka-eos sink %s: batch %s aborted after %d transactions of its tasks "
                "committed; their records stay, and the batch's replay skips them",
                self.settings.topic,
                batch,
                done,
            )


class KafkaStreamWriter(_KafkaWriter, DataSourceStreamArrowWriter):
    def commit(self, messages: list[Any], batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        self._abort(messages, batchId)


class KafkaBatchWriter(_KafkaWriter, DataSourceArrowWriter):
    def commit(self, messages: list[Any]) -> None:
        self._commit(messages, "(batch write)")

    def abort(self, messages: list[Any]) -> None:
        self._abort(messages, "(batch write)")


class KafkaEosDataSource(DataSource):
    """``writeStream.format("kafka-eos")`` (and ``write.format("kafka-eos")``)."""

    counter: Any = None  # set on the class counted_sink() makes

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.settings = KafkaSinkSettings.of(options)

    @classmethod
    def name(cls) -> str:
        return NAME

    def _writer(
        self, schema: StructType, overwrite: bool
    ) -> tuple[KafkaSinkSettings, SourceColumns, Any]:
        if overwrite:
            raise StatefulQuery(
                "the kafka-eos sink takes output mode append only: a complete (or "
                "overwriting) output rewrites results, which a topic cannot take back"
            )
        fields = {f.name: f.dataType.simpleString() for f in schema.fields}
        columns = resolve(self.settings, fields)
        for name, required in (
            (self.settings.value_column, True),
            (self.settings.key_column, self.settings.key_required),
        ):
            if name not in fields:
                if required:
                    raise KafkaSinkRefused(
                        f"the kafka-eos sink writes column {name!r} as each record's "
                        f"{'value' if name == self.settings.value_column else 'key'}, and "
                        f"the rows have no such column (columns: {', '.join(fields)}); "
                        "build it (to_json(struct(...)) for JSON) or name another with "
                        "valueColumn/keyColumn"
                    )
                continue
            kind = schema[name].dataType
            if not isinstance(kind, (StringType, BinaryType)):
                raise KafkaSinkRefused(
                    f"the kafka-eos sink's column {name!r} must be a string or binary, "
                    f"got {kind.simpleString()}"
                )
        marks.ensure_topic(self.settings)
        log.info(
            "kafka-eos sink to %s (%s), source: %s",
            self.settings.topic,
            masked(self.settings.client).get("bootstrap.servers"),
            columns.describe(),
        )
        return self.settings, columns, self.counter

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaStreamWriter(*self._writer(schema, overwrite))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaBatchWriter(*self._writer(schema, overwrite))


def counted_sink(spark: Any) -> type[KafkaEosDataSource]:
    """The sink class to register with ``spark``: its tasks add their counts to an
    accumulator of this driver process (:func:`~enrich.spark.sink.kafka_eos.stats.
    kafka_sink_statistics`). Made here, not imported, so that Spark pickles it with
    its accumulator."""
    return type(
        "KafkaEosDataSource",
        (KafkaEosDataSource,),
        {
            "counter": stats.counter_for(spark),
            "__qualname__": "counted_sink.<locals>.KafkaEosDataSource",
        },
    )
