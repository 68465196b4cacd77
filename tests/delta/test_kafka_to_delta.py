"""kafka -> lookup_join -> delta, against the project's broker, a real Redis and Delta's
own streaming sink on pyspark 4.2 (the Delta venv: ``./scripts/dev test-delta``).

- A restart after a kill between Delta's commit of a batch and Spark's commit log runs
  that batch again, and Delta skips it: with batches cut otherwise on the restart, the
  table holds every record once, joined.
- The example job config runs as it is (``jobs.enrich_job``, in this session).
- The dead-letter split writes Delta with its idempotent batch writes: a micro-batch
  written twice under one batch id is in each table once.
- ``low_latency(df, sink="delta")`` is refused, named; Spark refuses async progress
  tracking on Delta's sink itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from enrich.demo.kafka_broker import KafkaBroker
from tests.support.delta_table import column_counts, committed_batch
from tests.support.kafka_fixtures import create_topic, produce

pytestmark = [pytest.mark.delta, pytest.mark.spark, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
USERS = 30


def orders(start: int, stop: int) -> list[bytes]:
    return [json.dumps({"order_id": i, "user_id": i % 40}).encode() for i in range(start, stop)]


def seed_users(client: Any) -> None:
    client.mset({f"user:{i}": json.dumps({"name": f"n{i}", "tier": "t"}) for i in range(USERS)})


def spark_commits(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").glob("*") if p.name.isdigit())


def run_to_end(spark: Any, bootstrap: str, topic: str, url: str, where: Path, limit: int) -> None:
    """The query, Trigger.AvailableNow: the topic to its end, ``limit`` records a batch."""
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join

    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", limit)
        .load()
    )
    parsed = raw.selectExpr(
        "topic",
        "partition",
        "offset",
        "CAST(get_json_object(CAST(value AS STRING), '$.order_id') AS BIGINT) AS order_id",
        "CAST(get_json_object(CAST(value AS STRING), '$.user_id') AS BIGINT) AS user_id",
    )
    users = RedisLookup(url, key_template="user:{}", value="json", schema="name string")
    joined = lookup_join(parsed, users, on="user_id", how="left")
    query = (
        joined.writeStream.format("delta")
        .option("checkpointLocation", str(where / "ck"))
        .trigger(availableNow=True)
        .start(str(where / "table"))
    )
    query.awaitTermination()
    assert query.exception() is None


def test_a_batch_replayed_after_delta_committed_it_is_skipped_each_record_once(
    tmp_path: Path,
    delta_spark: Any,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    redis_server: Any,
    redis_client: Any,
) -> None:
    seed_users(redis_client)
    bootstrap, table, checkpoint = kafka_broker.bootstrap, tmp_path / "table", tmp_path / "ck"
    create_topic(bootstrap, kafka_topic, partitions=2)
    produce(bootstrap, kafka_topic, orders(0, 60))
    run_to_end(delta_spark, bootstrap, kafka_topic, redis_server.url, tmp_path, limit=25)
    last = spark_commits(checkpoint)[-1]
    assert last >= 2 and committed_batch(table) == last  # 60 records, <= 25 a batch
    # A kill after Delta committed batch `last` and before Spark logged its commit:
    # Spark's offsets log has the batch, its commit log does not.
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    versions = len(list((table / "_delta_log").glob("*.json")))
    produce(bootstrap, kafka_topic, orders(60, 90))
    run_to_end(delta_spark, bootstrap, kafka_topic, redis_server.url, tmp_path, limit=40)

    assert last in spark_commits(checkpoint)  # Spark ran the batch again, and went on
    counts = column_counts(table, "order_id")
    assert sorted(counts) == list(range(90))
    assert set(counts.values()) == {1}, {k: n for k, n in counts.items() if n > 1}
    # Delta wrote no version for the replayed batch: one version per new batch only.
    new_batches = [b for b in spark_commits(checkpoint) if b > last]
    assert len(list((table / "_delta_log").glob("*.json"))) == versions + len(new_batches)
    rows = delta_spark.read.format("delta").load(str(table)).collect()
    assert len(rows) == 90
    assert all(r["name"] == f"n{r['user_id']}" for r in rows if r["user_id"] < USERS)
    assert all(r["name"] is None for r in rows if r["user_id"] >= USERS)  # left join misses


def test_the_kafka_to_delta_example_runs_as_it_is(
    tmp_path: Path,
    delta_spark: Any,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    redis_server: Any,
    redis_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobs import _config, enrich_job

    seed_users(redis_client)
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=2)
    produce(kafka_broker.bootstrap, kafka_topic, orders(0, 50))
    table = tmp_path / "orders-enriched"
    for name, value in {
        "ENRICH_KAFKA": kafka_broker.bootstrap,
        "ENRICH_KAFKA_TOPIC": kafka_topic,
        "ENRICH_REDIS_URL": redis_server.url,
        "ENRICH_DELTA_TABLE": str(table),
        "ENRICH_CHECKPOINTS": str(tmp_path / "ck"),
        "ENRICH_TRIGGER": "availableNow",
    }.items():
        monkeypatch.setenv(name, value)
    config = _config.load(ROOT / "examples" / "kafka_to_delta.yaml")
    assert config.warnings == ()
    enrich_job.run(delta_spark, config)
    counts = column_counts(table, "order_id")
    assert sorted(counts) == list(range(50)) and set(counts.values()) == {1}
    names = {r["order_id"]: r["name"] for r in delta_spark.read.format("delta").load(str(table))
             .select("order_id", "name").collect()}  # fmt: skip
    assert names[7] == "n7" and names[35] is None


def test_the_dead_letter_split_writes_delta_once_per_batch_id(
    tmp_path: Path, delta_spark: Any
) -> None:
    from jobs import _streams
    from jobs._endpoints import Endpoint

    sink = Endpoint(format="delta", kind="delta", path=str(tmp_path / "good"))
    dead = Endpoint(format="delta", kind="delta", path=str(tmp_path / "dead"))
    batch = delta_spark.createDataFrame(
        [(i, None if i % 3 else "users: timeout") for i in range(12)],
        f"order_id long, {_streams.ERROR_COLUMN} string",
    )
    split = _streams._splitter(sink, dead, str(tmp_path / "ck"))
    for batch_id in (0, 0):  # batch 0, then its replay after a failure
        split(batch, batch_id)
    good, failed = (
        column_counts(tmp_path / "good", "order_id"),
        column_counts(tmp_path / "dead", "order_id"),
    )
    assert good == {i: 1 for i in range(12) if i % 3}  # once: the replay was skipped
    assert failed == {i: 1 for i in range(12) if not i % 3}


def test_low_latency_refuses_delta_and_so_does_spark(tmp_path: Path, delta_spark: Any) -> None:
    from enrich.spark import ProfileRefused, low_latency

    df = delta_spark.readStream.format("rate").load()
    with pytest.raises(ProfileRefused, match="cannot write to Delta: it runs under async"):
        low_latency(df, sink="delta")
    with pytest.raises(Exception, match="does not support async progress tracking"):
        (
            df.writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .option("asyncProgressTrackingEnabled", "true")
            .trigger(processingTime="0 seconds")
            .start(str(tmp_path / "table"))
        )
    assert os.listdir(tmp_path) in ([], ["ck"])  # refused before writing a version
