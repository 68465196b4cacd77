"""The sink's source marks in Kafka: a compacted topic, each mark written by the same
transaction as the rows it covers, read back by a ``read_committed`` consumer.

A source partition's marks all go to one partition of the marks topic
(:func:`~enrich.spark.sink.kafka_eos.source.mark_partition`), written only by the producer
holding that source partition's transactional id. The mark is the last committed record
with its key: read backwards from the partition's last stable offset in windows of
``WINDOW`` records, so the read costs one window while the sink runs (each batch writes
its marks at the end) and walks back further only for a partition that was idle while
others wrote.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from .settings import KafkaSinkSettings
from .source import Mark, decode_mark, mark_key, mark_partition

log = logging.getLogger("enrich.spark.sink.kafka_eos")

WINDOW = 2_000  # records of the marks partition read per step back
READ_TIMEOUT = 60.0  # seconds to read one window (a loaded broker answers within it)
TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}

_consumers: dict[tuple[int, str], Any] = {}


def ensure_topic(settings: KafkaSinkSettings, timeout: float = 60.0) -> None:
    """Create the marks topic (compacted) unless it exists; on the driver, before any
    task writes."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    config: dict[str, str | int | float | bool] = {**settings.client}
    admin = AdminClient(config)
    known = admin.list_topics(timeout=timeout).topics
    if settings.marks_topic in known:
        return
    topic = NewTopic(settings.marks_topic, settings.marks_partitions, -1, config=TOPIC_CONFIG)
    try:
        admin.create_topics([topic], operation_timeout=timeout)[settings.marks_topic].result(
            timeout
        )
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # another query created it first
            raise
    log.info("kafka-eos sink: created the marks topic %s", settings.marks_topic)


def _consumer(settings: KafkaSinkSettings) -> Any:
    """One marks consumer per process and cluster (Spark's Python workers are reused)."""
    from confluent_kafka import Consumer

    key = (os.getpid(), settings.bootstrap)
    found = _consumers.get(key)
    if found is None:
        found = _consumers[key] = Consumer(settings.consumer_config())
    return found


def partitions_of(settings: KafkaSinkSettings, timeout: float = 30.0) -> int:
    """The marks topic's partition count, as the broker has it."""
    meta = _consumer(settings).list_topics(settings.marks_topic, timeout=timeout)
    topic = meta.topics.get(settings.marks_topic)
    if topic is None or topic.error is not None or not topic.partitions:
        raise RuntimeError(
            f"kafka-eos sink: the marks topic {settings.marks_topic!r} is not available "
            f"({topic.error if topic is not None else 'unknown topic'})"
        )
    return len(topic.partitions)


def read_mark(settings: KafkaSinkSettings, source: str, partitions: int) -> Mark | None:
    """The mark of ``source`` committed in the marks topic, or None (never written).

    Read after this process's producer for ``source`` finished ``init_transactions``:
    every earlier producer of that transactional id is then fenced and its transaction
    completed, so no later commit can hide from this read."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(settings)
    key = mark_key(settings.identity, source)
    where = TopicPartition(settings.marks_topic, mark_partition(key, partitions))
    low, end = consumer.get_watermark_offsets(where, timeout=READ_TIMEOUT, cached=False)
    while end > low:
        start = max(low, end - WINDOW)
        found = _last_value(consumer, where, start, end, key)
        if found is not None:
            return decode_mark(found[0])
        end = start
    return None


def _last_value(
    consumer: Any, where: Any, start: int, end: int, key: bytes
) -> tuple[bytes | None] | None:
    """The value of the last record keyed ``key`` in ``[start, end)`` (a 1-tuple: a
    tombstone's is None), or None when there is none."""
    from confluent_kafka import KafkaException, TopicPartition

    consumer.assign([TopicPartition(where.topic, where.partition, start)])
    found: tuple[bytes | None] | None = None
    deadline = time.monotonic() + READ_TIMEOUT
    try:
        while True:
            # A read_committed consumer skips aborted records and control markers, so
            # the position, not the last offset seen, says when the window is read.
            position = consumer.position([TopicPartition(where.topic, where.partition)])[0]
            if position.offset >= end:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"kafka-eos sink: reading the marks ({where.topic}[{where.partition}] "
                    f"{start}..{end}) took over {READ_TIMEOUT:g}s"
                )
            for message in consumer.consume(500, 0.2):
                error = message.error()
                if error is not None:
                    raise KafkaException(error)
                if message.offset() >= end:
                    return found
                if message.key() == key:
                    found = (message.value(),)
    finally:
        consumer.unassign()
