"""The ``kafka-alo`` sink's options: Spark's Kafka sink's names, read once; secrets
never shown."""

from __future__ import annotations

import pytest

from enrich.spark.sink.kafka.alo_errors import KafkaAloRefused
from enrich.spark.sink.kafka.alo_settings import AloSettings

SECRET = "pa55-w0rd"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="u" password="{SECRET}";'
)


def test_kafka_options_go_to_the_producer_without_their_prefix() -> None:
    settings = AloSettings.of(
        {"kafka.bootstrap.servers": "h:9092", "kafka.acks": "1", "TOPIC": " out ", "url": "x"}
    )
    assert settings.topic == "out"
    assert settings.value_columns is None
    config = settings.producer_config()
    assert config["bootstrap.servers"] == "h:9092" and config["acks"] == "1"
    assert config["partitioner"] == "murmur2_random"  # as Java's: keys land where Spark's do
    assert "url" not in config and "topic" not in config


def test_value_columns_and_no_topic() -> None:
    settings = AloSettings.of({"kafka.bootstrap.servers": "h:1", "valueColumns": "a, b ,"})
    assert settings.topic is None and settings.target == "(each row's topic)"
    assert settings.value_columns == ("a", "b")
    with pytest.raises(KafkaAloRefused, match="valueColumns names no column"):
        AloSettings.of({"kafka.bootstrap.servers": "h:1", "valueColumns": " , "})


def test_the_cluster_is_required() -> None:
    with pytest.raises(KafkaAloRefused, match=r'option\("kafka.bootstrap.servers"'):
        AloSettings.of({"topic": "out"})


def test_secrets_are_never_in_the_repr_nor_a_refusal() -> None:
    settings = AloSettings.of(
        {"kafka.bootstrap.servers": "h:1", "kafka.sasl.jaas.config": JAAS, "topic": "t"}
    )
    assert settings.client["sasl.password"] == SECRET  # librdkafka's form
    assert SECRET not in repr(settings) and "***" in repr(settings)
    with pytest.raises(KafkaAloRefused) as refused:
        AloSettings.of({"kafka.bootstrap.servers": "h:1", "kafka.sasl.jaas.config": SECRET})
    assert SECRET not in str(refused.value)
