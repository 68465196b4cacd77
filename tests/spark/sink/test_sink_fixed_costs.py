"""The redis sink's fixed costs per micro-batch: connections kept per process, the cluster
check asked once, staging in few round trips."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from enrich.spark import redis_options, register_data_sources
from enrich.spark.sink.redis.data_source import RedisStreamWriter
from enrich.spark.sink.redis.row_writes import SinkSettings

pytestmark = [pytest.mark.timeout(300)]

SCHEMA = StructType([StructField("order_id", LongType()), StructField("name", StringType())])


def _connections(client: redis.Redis) -> int:
    return int(client.info("stats")["total_connections_received"])


def _calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


class _Task:
    """What TaskContext.get() returns inside a task: the parts the sink reads."""

    def partitionId(self) -> int:
        return 0

    def taskAttemptId(self) -> int:
        return 7

    def getLocalProperty(self, name: str) -> str | None:
        return "3" if name == "streaming.sql.batchId" else None


def test_connect_reuses_the_processes_connection_and_reopens_a_closed_one(
    redis_server: Any, redis_client: redis.Redis
) -> None:
    first = redis_options.connect(redis_server.url)
    own = first.client_id()
    first.close()
    before = _connections(redis_client)
    second = redis_options.connect(redis_server.url)
    assert second.client_id() == own
    second.close()
    assert _connections(redis_client) == before

    redis_client.client_kill_filter(_id=own)  # the server drops it (a restart, a timeout)
    third = redis_options.connect(redis_server.url)
    assert third.ping() and third.client_id() != own
    third.close()


def test_the_cluster_check_is_asked_once_per_process(
    redis_server: Any, redis_client: redis.Redis, monkeypatch: Any
) -> None:
    url = redis_server.url
    monkeypatch.setattr(redis_options, "_clusters", {}, raising=False)  # none asked
    before = _connections(redis_client)
    assert redis_options.is_cluster(url) is False
    assert redis_options.is_cluster(url) is False
    assert _connections(redis_client) == before + 1


def test_a_task_stages_its_arrow_batches_in_one_round_trip(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = SinkSettings.of(
        {"url": redis_server.url, "stream": "out", "checkpointLocation": str(tmp_path / "ck")}
    )
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Task()))
    # Spark hands a task its partition in Arrow batches of maxRecordsPerBatch rows.
    batches = [
        pa.record_batch(
            [pa.array(range(start, start + 100), pa.int64()), pa.array(["n"] * 100)],
            names=["order_id", "name"],
        )
        for start in range(0, 2_000, 100)
    ]
    redis_client.config_resetstat()
    part = RedisStreamWriter(settings, SCHEMA, None).write(iter(batches))
    assert part.rows == 2_000 and part.staging is not None
    assert redis_client.llen(part.staging) == 2_000
    assert redis_client.sismember(f"enrich:sink:{settings.identity}:staging", part.staging)
    assert (_calls(redis_client, "rpush"), _calls(redis_client, "sadd")) == (1, 1)


def test_micro_batches_after_the_first_open_no_connection(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Tasks reuse their Python worker's connection, the commit its process's, and the
    cluster check is not asked again: before, each micro-batch opened one connection per
    task, one for the commit and two for the cluster checks."""
    register_data_sources(spark)
    source = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 20)
        .option("numPartitions", 2)
        .load()
    )
    query = (
        source.writeStream.format("redis")
        .option("url", redis_server.url)
        .option("stream", "out")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )

    def batches_done() -> int:
        return sum(1 for p in query.recentProgress if p["numInputRows"])

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 120
        while batches_done() < n:
            assert query.exception() is None and time.monotonic() < deadline
            time.sleep(0.05)

    try:
        wait_for(2)
        before = _connections(redis_client)
        wait_for(6)
        opened = _connections(redis_client) - before
    finally:
        query.stop()
    assert redis_client.xlen("out") >= 6 * 20
    # Three micro-batches or more ran in between: 15 or more connections before.
    assert opened <= 2, f"{opened} connections opened over 3-4 micro-batches"
