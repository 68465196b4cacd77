"""A task's records sent to a real broker: all delivered before ``send_all`` returns,
a record the broker refuses fails the write naming its topic and partition, and a
setting the client refuses fails it without showing a secret."""

from __future__ import annotations

import pytest

from enrich.demo.kafka_broker import KafkaBroker
from enrich.spark.sink.kafka import producing
from enrich.spark.sink.kafka.alo_errors import DeliveryFailed, KafkaAloRefused
from enrich.spark.sink.kafka.record_columns import UNASSIGNED
from tests.support.kafka_fixtures import create_topic
from tests.support.kafka_reading import read_all

pytestmark = [pytest.mark.timeout(180)]

SECRET = "pa55-w0rd"


def test_every_record_is_delivered_before_the_write_returns(
    kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=2)
    config = {"bootstrap.servers": kafka_broker.bootstrap}
    records = [(kafka_topic, f"v{i}".encode(), None, i % 2, None) for i in range(2500)]
    assert producing.send_all(config, records) == 2500
    # No flush here: what send_all returned after is on the broker already.
    assert sorted(read_all(kafka_broker.bootstrap, kafka_topic, timeout=30)) == sorted(
        r[1] for r in records
    )
    again = producing.send_all(config, [(kafka_topic, b"x", None, UNASSIGNED, None)])
    assert again == 1 and len(producing._kept) == 1  # the process's producer, kept


def test_a_record_the_broker_refuses_fails_the_write_naming_topic_and_partition(
    kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=1)
    # The client would take 4 MB; the broker takes at most ~1 MB a record.
    config = {"bootstrap.servers": kafka_broker.bootstrap, "message.max.bytes": "5000000"}
    big = b"x" * 2_000_000
    records = [(kafka_topic, b"small", None, 0, None), (kafka_topic, big, None, 0, None)]
    with pytest.raises(DeliveryFailed) as failed:
        producing.send_all(config, records)
    assert (failed.value.topic, failed.value.partition, failed.value.failed) == (kafka_topic, 0, 1)
    assert f"1 of 2 records of this task were not delivered; the first to topic " \
           f"'{kafka_topic}', partition 0" in str(failed.value)  # fmt: skip


def test_a_refused_setting_fails_the_write_without_its_secret(kafka_broker: KafkaBroker) -> None:
    config = {"bootstrap.servers": kafka_broker.bootstrap, "sasl.password": SECRET,
              "linger.ms": SECRET}  # fmt: skip
    with pytest.raises(KafkaAloRefused, match="the producer refused its settings") as refused:
        producing.send_all(config, [("t", b"v", None, UNASSIGNED, None)])
    assert SECRET not in str(refused.value) and "Invalid value" in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
