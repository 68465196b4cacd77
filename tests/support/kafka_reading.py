"""What a ``read_committed`` (or ``read_uncommitted``) consumer finds in a topic: every
record up to each partition's last stable offset, read to the end (no count to wait
for, so a record written twice is found as surely as a missing one)."""

from __future__ import annotations

import time
import uuid


def read_all(
    bootstrap: str, topic: str, *, committed: bool = True, timeout: float = 60.0
) -> list[bytes]:
    """The values of ``topic``'s records, partition by partition, each in its order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics[topic]
        values: list[bytes] = []
        for partition in sorted(meta.partitions):
            where = TopicPartition(topic, partition)
            low, end = _watermarks(consumer, where, timeout)
            if end <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            deadline = time.monotonic() + timeout
            while consumer.position([where])[0].offset < end:
                assert time.monotonic() < deadline, f"{topic}[{partition}] not read to {end}"
                for message in consumer.consume(1000, 0.2):
                    assert message.error() is None, message.error()
                    if message.offset() < end:
                        values.append(message.value())
            consumer.unassign()
        return values
    finally:
        consumer.close()


def _watermarks(consumer, where, timeout: float) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """A partition's low and high watermarks; a retriable error (a topic created a moment
    ago whose leader is not elected yet, a broker restarting) is asked again."""
    from confluent_kafka import KafkaError, KafkaException

    settling = {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    }
    deadline = time.monotonic() + timeout
    while True:
        try:
            low, end = consumer.get_watermark_offsets(where, timeout=timeout, cached=False)
            return int(low), int(end)
        except KafkaException as exc:
            error = exc.args[0]
            if not (error.retriable() or error.code() in settling) or time.monotonic() > deadline:
                raise
        time.sleep(0.2)  # the broker's metadata settles by itself: nothing to wait on
