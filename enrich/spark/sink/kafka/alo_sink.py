"""The ``kafka-alo`` data source: a Python Kafka sink, at least once, taking Spark's own
Kafka sink's options and row conventions, that can run a query's lookup joins and
``async_map`` calls inside its write.

``writeStream.format("kafka-alo")`` writes what ``writeStream.format("kafka")`` would:
each row a record of its ``value`` (its ``key``, ``partition``, ``headers`` when the rows
have them) to the ``topic`` option's topic or the row's ``topic``
(:mod:`~enrich.spark.sink.kafka.record_columns`), with ``kafka.*`` options given to the
producer (:mod:`~enrich.spark.sink.kafka.alo_settings`). Being a Python sink written on
:class:`~enrich.spark.sink.joined.JoinableSink`, it runs a query's Python stage in its
own write: under :func:`enrich.spark.low_latency` with ``sink="kafka"``, a query
``kafka -> lookup_join -> kafka`` crosses from the JVM to Python once (the join's
``mapInArrow`` stage and Spark's Kafka writer become this sink's one write).

Guarantees (Spark's own Kafka sink's): at least once. A task's write returns after the
broker took each of its records (:mod:`~enrich.spark.sink.kafka.producing`), so a
committed micro-batch lost nothing; a failed task or batch is written again by Spark's
retry or replay, and records of it written before are written again (duplicates, never
gaps). The driver's ``commit`` and ``abort`` have nothing to publish or undo: they log
the counts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from ...stages.arrow_stage import ArrowFunction
from ..joined import JoinableSink, run_stage
from ..kafka_config import masked
from .alo_settings import AloSettings
from .record_columns import RecordColumns, plan, records

log = logging.getLogger("enrich.spark.sink.kafka")

NAME = "kafka-alo"


@dataclass
class SentPart(WriterCommitMessage):
    """What a task wrote: its records, all delivered."""

    records: int


class _AloWriter:
    """The executor half (``write``) and the driver's counts."""

    def __init__(
        self, settings: AloSettings, columns: RecordColumns, stage: ArrowFunction | None
    ) -> None:
        self.settings = settings
        self.columns = columns
        self.stage = stage  # a query's Python stage, run here (enrich.spark.sink.joined)

    def write(self, iterator: Iterator[Any]) -> SentPart:
        from .producing import send_all

        sent = send_all(self.settings.producer_config(), self._records(iterator))
        return SentPart(sent)

    def _records(self, iterator: Iterator[Any]) -> Iterator[Any]:
        for batch in run_stage(self.stage, iterator):
            if not isinstance(batch, pa.RecordBatch):  # a caller passing Rows
                raise TypeError("the kafka-alo sink's writer takes Arrow record batches")
            yield from records(batch, self.columns)

    def _commit(self, messages: list[Any], batch: Any) -> None:
        sent = sum(m.records for m in messages if isinstance(m, SentPart))
        log.info("kafka-alo sink %s: batch %s: %d records", self.settings.target, batch, sent)

    def _abort(self, messages: list[Any], batch: Any) -> None:
        sent = sum(m.records for m in messages if isinstance(m, SentPart))
        log.warning(
            "kafka-alo sink %s: batch %s aborted; %d records of its successful tasks stay "
            "written, and its replay writes them again (at least once)",
            self.settings.target,
            batch,
            sent,
        )


class KafkaAloStreamWriter(_AloWriter, DataSourceStreamArrowWriter):
    def commit(self, messages: list[Any], batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        self._abort(messages, batchId)


class KafkaAloBatchWriter(_AloWriter, DataSourceArrowWriter):
    def commit(self, messages: list[Any]) -> None:
        self._commit(messages, "(batch write)")

    def abort(self, messages: list[Any]) -> None:
        self._abort(messages, "(batch write)")


class KafkaAloSink(JoinableSink):
    """``writeStream.format("kafka-alo")`` and ``write.format("kafka-alo")``."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.settings = AloSettings.of(options)

    @classmethod
    def name(cls) -> str:
        return NAME

    def _columns(self, schema: StructType) -> RecordColumns:
        schema = self.joined_schema(schema)
        fields = {f.name: f.dataType.simpleString() for f in schema.fields}
        columns = plan(fields, self.settings)
        log.info(
            "kafka-alo sink to %s (%s)%s",
            self.settings.target,
            masked(self.settings.client).get("bootstrap.servers"),
            ", running the query's stage" if self.joined_function() else "",
        )
        return columns

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaAloStreamWriter(self.settings, self._columns(schema), self.joined_function())

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaAloBatchWriter(self.settings, self._columns(schema), self.joined_function())
