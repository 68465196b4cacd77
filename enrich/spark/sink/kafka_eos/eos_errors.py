"""What the ``kafka-eos`` sink refuses, and what stops a task's transaction.

::

    EnrichError
    ├── KafkaSinkRefused (also ValueError)      the query cannot be made exactly once
    │   ├── MissingOption                       a required option is not set
    │   ├── SourceNotKeyed                      rows do not carry their source record
    │   ├── SourcePartitionSplit                one source partition over several tasks
    │   └── StatefulQuery                       aggregations, deduplication, complete mode
    └── TransactionFailed (also RuntimeError)   a task's transaction could not commit
        └── ProducerFenced                      another attempt took its transactional id

Every refusal is raised on the driver before any task writes, except the backstop of
:class:`SourcePartitionSplit` at the batch's commit (see its docstring).
"""

from __future__ import annotations

from enrich import EnrichError

from .. import sink_spi as spi


class KafkaSinkRefused(EnrichError, ValueError):
    """The ``kafka-eos`` sink would not be exactly once for this query; the message says
    why and what to change."""

    retryable = False


class MissingOption(KafkaSinkRefused):
    """A required option is not set (its name is in ``option``)."""

    def __init__(self, option: str, why: str) -> None:
        super().__init__(f'the kafka-eos sink needs .option("{option}", ...): {why}')
        self.option = option


class SourceNotKeyed(KafkaSinkRefused, spi.SourceNotKeyed):
    """The rows do not carry the source record they come from (Kafka's ``topic``,
    ``partition``, ``offset`` or the redis-stream source's ``stream_key``,
    ``stream_id``), or the query reads another source: the sink could not tell a
    replayed record from a new one."""


class SourcePartitionSplit(KafkaSinkRefused):
    """One source partition's records of a batch go to several tasks (a shuffle, Kafka's
    ``minPartitions``/``maxRecordsPerPartition``, redis-stream's ``partitionsPerStream``
    above 1).

    Each source partition's mark is the highest offset written, advanced by one
    transaction per task: two tasks holding parts of one partition would share its
    transactional id (fencing each other) and its mark (a retried lower part would be
    skipped as written). Refused when the query is built with
    :func:`~enrich.spark.sink.kafka_eos.kafka_eos_writer`; with a bare
    ``writeStream.format("kafka-eos")`` the plan is not visible to the sink, and the
    batch's commit raises this error when two tasks reported the same source partition
    (their transactions are committed by then: records may be lost, and the query
    stops).

    Attributes:
        source: the source partition (``topic/partition`` or a stream key), or "" when
            found in the plan.
    """

    def __init__(self, message: str, source: str = "") -> None:
        super().__init__(message)
        self.source = source


class StatefulQuery(KafkaSinkRefused):
    """The query holds state between batches (an aggregation, a deduplication, a join of
    streams, a complete output mode): its output rows are not one per source record, so
    marks by source offset do not tell what was written."""


class TransactionFailed(EnrichError, RuntimeError):
    """A task's transaction for one source partition did not commit (after the retries
    a fenced or aborted transaction gets): nothing of it is visible to ``read_committed``
    consumers; the task fails and Spark's retry (or the query's restart) writes it again.

    Attributes:
        source: the source partition (``topic/partition`` or a stream key).
        transactional_id: the producer's ``transactional.id``.
    """

    def __init__(self, message: str, source: str, transactional_id: str) -> None:
        super().__init__(message)
        self.source, self.transactional_id = source, transactional_id

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.source, self.transactional_id))


class ProducerFenced(TransactionFailed):
    """Another producer with the same ``transactional.id`` started after this one (a
    second attempt of the task, a speculative copy, or a restarted query) more times
    than the task retries: this attempt gave way."""
