"""Kafka jobs run as users run them, against the project's broker: ``enrich check``
names a broker that is down in one line; ``enrich run`` of the kafka -> enrich -> kafka
example writes every record enriched (Spark's Kafka sink) and never prints the
``kafka.sasl.jaas.config`` it was given; the kafka -> redis example under
``latency: low`` writes each record once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from enrich.demo.kafka_broker import KafkaBroker, free_port
from jobs import _config, _streams, enrich_job
from tests.support.kafka_fixtures import consume, create_topic, produce
from tests.support.spark_version import requires_spark

pytestmark = [pytest.mark.timeout(300)]
SPARK_KAFKA = requires_spark(4, 2, "Spark's Kafka connector (4.2.0) on the classpath")
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SECRET = "k4fka-S3CRET-9e107d"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="enrich" password="{SECRET}";'
)


def enrich_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "enrich.cli", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )


def with_secret(tmp_path: Path, example: str) -> Path:
    """The example, with a JAAS config holding a password (PLAINTEXT ignores it)."""
    text = (EXAMPLES / example).read_text()
    anchor = "    startingOffsets: earliest\n"
    assert anchor in text
    text = text.replace(anchor, f"{anchor}    kafka.sasl.jaas.config: '{JAAS}'\n", 1)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def orders(n: int) -> list[bytes]:
    return [json.dumps({"order_id": i, "user_id": i % 40}).encode() for i in range(n)]


def seed_users(client: Any) -> None:
    client.mset({f"user:{i}": json.dumps({"name": f"n{i}", "tier": "t"}) for i in range(30)})


def test_enrich_check_names_a_broker_that_is_down_in_one_line(
    tmp_path: Path, redis_server: Any, redis_client: Any, kafka_broker: KafkaBroker
) -> None:
    seed_users(redis_client)
    down = f"127.0.0.1:{free_port()}"
    env = {"ENRICH_REDIS_URL": redis_server.url, "ENRICH_KAFKA": down}
    job = with_secret(tmp_path, "kafka_to_kafka.yaml")
    result = enrich_cli("check", str(job), env=env)
    assert result.returncode != 0
    failed = [line for line in result.stderr.splitlines() if line.startswith("FAILED")]
    assert failed == [
        f"FAILED kafka 'source': no Kafka broker answers at {down} (Connection refused)",
        f"FAILED kafka 'sink': no Kafka broker answers at {down} (Connection refused)",
    ], result.stderr
    assert SECRET not in result.stdout + result.stderr
    result = enrich_cli("check", str(job), env={**env, "ENRICH_KAFKA": kafka_broker.bootstrap})
    assert result.returncode == 0, result.stderr
    assert f"ok     kafka 'source': broker {kafka_broker.bootstrap} accepts" in result.stdout
    assert SECRET not in result.stdout + result.stderr


@pytest.mark.spark
@pytest.mark.slow
@SPARK_KAFKA
def test_enrich_run_kafka_to_kafka_writes_every_record_enriched_and_no_secret(
    tmp_path: Path,
    redis_server: Any,
    redis_client: Any,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
) -> None:
    seed_users(redis_client)
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=2)
    produce(kafka_broker.bootstrap, kafka_topic, orders(200))
    env = {
        "ENRICH_REDIS_URL": redis_server.url,
        "ENRICH_KAFKA": kafka_broker.bootstrap,
        "ENRICH_KAFKA_TOPIC": kafka_topic,
        "ENRICH_KAFKA_OUT": f"{kafka_topic}-out",
        "ENRICH_CHECKPOINTS": str(tmp_path / "ck"),
        "ENRICH_TRIGGER": "availableNow",
    }
    log = tmp_path / "job.log"
    job = with_secret(tmp_path, "kafka_to_kafka.yaml")
    result = enrich_cli("run", str(job), "--log-file", str(log), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert SECRET not in result.stdout + result.stderr
    out = [json.loads(v) for v in consume(kafka_broker.bootstrap, f"{kafka_topic}-out", 200)]
    assert sorted(int(r["order_id"]) for r in out) == list(range(200))
    assert all(r.get("name") == f"n{r['user_id']}" for r in out if r["user_id"] < 30)
    assert not any("name" in r for r in out if r["user_id"] >= 30)  # a left join's misses


@pytest.mark.spark
@pytest.mark.slow
@SPARK_KAFKA
def test_the_kafka_to_redis_example_writes_each_record_once_under_latency_low(
    spark: Any,
    tmp_path: Path,
    redis_server: Any,
    redis_client: Any,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed_users(redis_client)
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=2)
    produce(kafka_broker.bootstrap, kafka_topic, orders(150))
    for name, value in {
        "ENRICH_REDIS_URL": redis_server.url,
        "ENRICH_KAFKA": kafka_broker.bootstrap,
        "ENRICH_KAFKA_TOPIC": kafka_topic,
        "ENRICH_CHECKPOINTS": str(tmp_path / "ck"),
    }.items():
        monkeypatch.setenv(name, value)
    config = _config.load(EXAMPLES / "kafka_to_redis.yaml")
    assert config.source is not None
    df, _ = enrich_job.enrich(spark, config, _streams.read(spark, config.source))
    _streams.register_data_sources(spark)
    query = _streams.start(df, config)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = [f for _, f in redis_client.xrange("orders-enriched")]
    assert sorted(int(f[b"order_id"]) for f in rows) == list(range(150))
    assert {f[b"name"] for f in rows if int(f[b"user_id"]) == 7} == {b"n7"}
