"""The Kafka sinks' client settings from Spark's options: ``kafka.*`` without the
prefix, Java's JAAS line as librdkafka's, and no secret shown."""

from __future__ import annotations

import pytest

from enrich.spark.sink.kafka_config import caseless, client_config, masked, scrubbed

SECRET = "pa55-w0rd"
JAAS = f'x.PlainLoginModule required username="u" password="{SECRET}";'


def test_kafka_options_lose_their_prefix_and_jaas_becomes_librdkafka_s() -> None:
    config = client_config({"kafka.bootstrap.servers": "h:1", "kafka.sasl.jaas.config": JAAS,
                            "topic": "t"})  # fmt: skip
    assert config == {"bootstrap.servers": "h:1", "sasl.username": "u", "sasl.password": SECRET}
    assert masked(config)["sasl.password"] == "***"
    with pytest.raises(KeyError, match="its value is not shown") as refused:
        client_config({"kafka.sasl.jaas.config": SECRET}, error=KeyError)  # type: ignore[arg-type]
    assert SECRET not in str(refused.value)


def test_a_client_s_message_loses_every_secret_value() -> None:
    config = {"sasl.password": SECRET, "ssl.key.password": "k3y", "acks": "all"}
    text = f'Invalid value "{SECRET}" for "sasl.password"; k3y; acks=all'
    assert scrubbed(text, config) == 'Invalid value "***" for "sasl.password"; ***; acks=all'


def test_options_are_read_whatever_the_case() -> None:
    options = caseless({"valueColumns": "a", "Topic": 1})
    assert options.get("VALUECOLUMNS") == "a" and options.get("topic") == "1"
    assert "TOPIC" in options and "other" not in options
