"""pytest fixtures giving tests a real Kafka broker (``enrich.demo.kafka_broker``): one
KRaft node from Kafka's own jars, started once per session on free loopback ports.

Without the jars (``scripts/kafka/fetch`` not run) the tests that use it skip, saying
so; with ``ENRICH_REQUIRE_KAFKA=1`` (CI) they fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from enrich.demo.kafka_broker import BrokerUnavailable, KafkaBroker

__all__ = ("kafka_broker", "kafka_topic", "produce", "consume", "consume_messages", "create_topic")


def _unavailable(exc: BrokerUnavailable) -> None:
    if os.environ.get("ENRICH_REQUIRE_KAFKA") == "1":
        pytest.fail(f"ENRICH_REQUIRE_KAFKA=1 and no Kafka broker: {exc}", pytrace=False)
    pytest.skip(f"no Kafka broker: {exc}")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One broker for the session: ``.bootstrap`` is its ``host:port``."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    try:
        broker.start()
    except BrokerUnavailable as exc:
        _unavailable(exc)
        raise
    yield broker
    broker.stop()


@pytest.fixture
def kafka_topic() -> str:
    """A topic name of this test's own (the broker is shared by the session)."""
    return f"t-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def produce(
    bootstrap: str, topic: str, values: list[bytes], *, partition: int | None = None
) -> None:
    """Write ``values`` in order (to ``partition``, or round robin by Kafka's default
    partitioner on a null key) and wait until the broker has them all."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        if partition is None:
            producer.produce(topic, value)
        else:
            producer.produce(topic, value, partition=partition)
    left = producer.flush(60)
    assert left == 0, f"{left} records not delivered to {topic}"


def consume(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[bytes]:
    """The values of ``topic`` from its start, once ``expected`` of them arrived (or the
    timeout passed: the caller's assertion then says what is missing)."""
    return [m.value() for m in consume_messages(bootstrap, topic, expected, timeout)]


def consume_messages(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[Any]:
    """As :func:`consume`, the messages whole (key, value, partition, headers)."""
    import time

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    messages: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    messages.append(message)
    finally:
        consumer.close()
    return messages
