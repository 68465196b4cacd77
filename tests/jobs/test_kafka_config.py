"""A job's Kafka source and sink, checked where the config is read (no Spark): Spark's
option names and meanings (``maxOffsetsPerTrigger``, ``failOnDataLoss``, one
subscription), ``kafka.*`` options passed on as they are and their values never shown,
``latency: low`` from Kafka, and the examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs import _config
from tests.spark.conftest import ROOT

SECRET = "k4fka-S3CRET-d41d8c"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'  # noqa: E501

KAFKA_JOB: dict[str, Any] = {
    "source": {"format": "kafka",
               "options": {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders",
                           "kafka.sasl.jaas.config": JAAS, "maxOffsetsPerTrigger": 500,
                           "failOnDataLoss": False},
               "select": ["topic", "partition", "offset", "CAST(value AS STRING) AS user_id"]},
    "stores": {"users": {"kind": "redis", "url": "redis://127.0.0.1:6379",
                         "key_template": "user:{}", "value": "hash", "schema": "name string"}},
    "joins": [{"store": "users", "on": "user_id"}],
    "sink": {"format": "kafka",
             "options": {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"},
             "select": ["to_json(struct(*)) AS value"]},
    "checkpoint": "/chk",
}  # fmt: skip


def load(tmp_path: Path, config: dict[str, Any]) -> _config.JobConfig:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    return _config.load(path)


def test_a_kafka_job_reads_as_spark_names_its_options(tmp_path: Path) -> None:
    config = load(tmp_path, KAFKA_JOB)
    assert config.source is not None and config.sink is not None
    assert config.source.options["maxOffsetsPerTrigger"] == "500"
    assert config.source.options["failOnDataLoss"] == "false"
    assert config.source.options["kafka.sasl.jaas.config"] == JAAS  # handed on as it is
    assert config.sink.select == ("to_json(struct(*)) AS value",)
    assert config.warnings == ()  # kafka.* options are the Kafka client's: no warning


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["source"]["options"].pop("kafka.bootstrap.servers"),
         r"source: format 'kafka' needs options.kafka.bootstrap.servers"),
        (lambda c: c["sink"]["options"].pop("kafka.bootstrap.servers"),
         r"sink: format 'kafka' needs options.kafka.bootstrap.servers"),
        (lambda c: c["source"]["options"].update(assign='{"orders":[0]}'),
         r"exactly one of options.subscribe .*; got subscribe, assign"),
        (lambda c: c["source"]["options"].pop("subscribe"), r"exactly one of .*; got none"),
        (lambda c: c["source"]["options"].update(maxOffsetsPerTrigger=0),
         r"maxOffsetsPerTrigger bounds the records of a micro-batch: .* got '0'"),
        (lambda c: c["source"]["options"].update(failOnDataLoss="sometimes"),
         r"failOnDataLoss must be true or false .*got 'sometimes'"),
    ],
)  # fmt: skip
def test_what_the_kafka_connector_would_refuse_is_named_first(
    tmp_path: Path, change: Any, message: str
) -> None:
    config = json.loads(json.dumps(KAFKA_JOB))
    change(config)
    with pytest.raises(_config.ConfigError, match=message) as failure:
        load(tmp_path, config)
    assert SECRET not in str(failure.value)


def test_a_misspelt_kafka_option_is_a_warning_without_its_value(tmp_path: Path) -> None:
    config = json.loads(json.dumps(KAFKA_JOB))
    config["source"]["options"]["maxOffsetPerTrigger"] = 10
    config["source"]["options"]["sasl.jaas.config"] = JAAS  # without kafka.: Spark ignores it
    warnings = load(tmp_path, config).warnings
    assert any("did you mean 'maxOffsetsPerTrigger'" in w for w in warnings), warnings
    assert any("source.options.sasl.jaas.config: not an option" in w for w in warnings)
    assert all(SECRET not in w for w in warnings)


def test_latency_low_takes_a_kafka_source_that_keeps_its_records_keys(tmp_path: Path) -> None:
    config = json.loads(json.dumps(KAFKA_JOB))
    config["sink"] = {"format": "redis", "options": {"url": "redis://h:6379", "stream": "out"}}
    config["latency"] = "low"
    assert load(tmp_path, config).latency == "low"
    config["source"]["select"] = ["offset", "CAST(value AS STRING) AS user_id"]
    with pytest.raises(_config.ConfigError, match="must keep topic and partition and offset"):
        load(tmp_path, config)


@pytest.mark.parametrize("name", ["kafka_to_kafka.yaml", "kafka_to_redis.yaml"])
def test_the_kafka_examples_load(name: str) -> None:
    config = _config.load(ROOT / "examples" / name)
    assert config.source is not None and config.source.format == "kafka"
    assert config.warnings == ()
