"""The transactional commit publishes only what its tasks staged, and the sink refuses a
transactional write to a Redis Cluster before any task runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyspark
import pytest
import redis
from pyspark.sql import Row, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from enrich.spark import register_data_sources
from enrich.spark.sink.redis.data_source import RedisSinkDataSource, RedisStreamWriter, StagedPart
from enrich.spark.sink.redis.row_writes import SinkSettings
from enrich.spark.sink.redis.two_phase import StagingMismatch, committed_batch, index_key
from tests.support.redis_fixtures import cluster_client, redis_cluster

__all__ = ("cluster_client", "redis_cluster")  # fixtures this module uses

SCHEMA = StructType([StructField("order_id", LongType()), StructField("name", StringType())])


class _Task:
    """What TaskContext.get() returns inside a task: the parts the sink reads."""

    def __init__(self, partition: int, attempt: int, batch: str) -> None:
        self._partition, self._attempt, self._batch = partition, attempt, batch

    def partitionId(self) -> int:
        return self._partition

    def taskAttemptId(self) -> int:
        return self._attempt

    def getLocalProperty(self, name: str) -> str | None:
        return self._batch if name == "streaming.sql.batchId" else None


def _stage(
    settings: SinkSettings, monkeypatch: Any, batch: str, parts: list[range]
) -> list[StagedPart]:
    """Each part's rows written by its own task of ``batch`` (the executor half)."""
    messages = []
    for partition, ids in enumerate(parts):
        task = _Task(partition, partition, batch)
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda t=task: t))
        writer = RedisStreamWriter(settings, SCHEMA, None)
        messages.append(writer.write(iter([Row(order_id=i, name=f"n{i}") for i in ids])))
    return messages


@pytest.fixture
def settings(redis_server: Any, tmp_path: Path) -> SinkSettings:
    return SinkSettings.of(
        {"url": redis_server.url, "stream": "out", "checkpointLocation": str(tmp_path / "ck")}
    )


def test_a_commit_refuses_a_batch_whose_staging_list_is_gone(
    settings: SinkSettings, redis_client: redis.Redis, monkeypatch: Any
) -> None:
    """Say Redis restarted without persistence between the write and the commit: one
    task's staging is gone. The batch must fail, not commit the other task's rows."""
    messages = _stage(settings, monkeypatch, "0", [range(0, 700), range(700, 1000)])
    assert [m.rows for m in messages] == [700, 300]
    lost = messages[1].staging
    assert lost is not None
    redis_client.delete(lost)

    with pytest.raises(StagingMismatch) as refused:
        RedisStreamWriter(settings, SCHEMA, None).commit(messages, 0)
    error = refused.value
    assert (error.batch, error.staging, error.expected, error.found) == ("0", lost, 300, 0)
    assert "batch 0 not committed" in str(error) and lost in str(error)
    assert "holds 0 operations, its task staged 300" in str(error)
    assert redis_client.xlen("out") == 0  # nothing of the batch published
    assert committed_batch(redis_client, settings.identity) is None
    assert redis_client.llen(messages[0].staging or "") == 700  # nothing deleted either

    # Spark aborts the batch and the restarted query replays it from its offsets.
    RedisStreamWriter(settings, SCHEMA, None).abort(messages, 0)
    replay = _stage(settings, monkeypatch, "0", [range(0, 700), range(700, 1000)])
    RedisStreamWriter(settings, SCHEMA, None).commit(replay, 0)
    published = [int(fields[b"order_id"]) for _, fields in redis_client.xrange("out")]
    assert sorted(published) == list(range(1000))
    assert committed_batch(redis_client, settings.identity) == 0
    assert redis_client.scard(index_key(settings.identity)) == 0


def test_a_commit_refuses_a_staging_list_shorter_than_its_task_reported(
    settings: SinkSettings, redis_client: redis.Redis, monkeypatch: Any
) -> None:
    messages = _stage(settings, monkeypatch, "4", [range(10)])
    staging = messages[0].staging or ""
    redis_client.rpop(staging)
    with pytest.raises(StagingMismatch, match="holds 9 operations, its task staged 10"):
        RedisStreamWriter(settings, SCHEMA, None).commit(messages, 4)
    assert redis_client.xlen("out") == 0
    assert committed_batch(redis_client, settings.identity) is None


def test_transactional_mode_on_a_cluster_fails_before_any_task(
    redis_cluster: Any, tmp_path: Path
) -> None:
    options = {"url": redis_cluster.url, "key": "k:{order_id}",
               "checkpointLocation": str(tmp_path / "ck")}  # fmt: skip
    source = RedisSinkDataSource(options)
    for start in (source.streamWriter, source.writer):
        with pytest.raises(ValueError) as refused:
            start(SCHEMA, False)
        message = str(refused.value)
        assert "Redis Cluster" in message and "one node" in message
        assert '.option("mode", "idempotent")' in message


def test_idempotent_mode_writes_to_a_cluster(
    spark: SparkSession, redis_cluster: Any, cluster_client: redis.RedisCluster, tmp_path: Path
) -> None:
    """The way the cluster refusal points to works: keys on every node, hashes and JSON."""
    register_data_sources(spark)
    df = spark.createDataFrame([(i, f"n{i}") for i in range(40)], schema=SCHEMA)
    for value in ("hash", "json"):
        (df.write.format("redis").option("url", redis_cluster.url)
         .option("key", f"{value}:{{order_id}}").option("value", value)
         .option("mode", "idempotent").mode("append").save())  # fmt: skip
    assert cluster_client.hgetall("hash:7") == {b"order_id": b"7", b"name": b"n7"}
    assert cluster_client.get("json:39") == b'{"order_id":39,"name":"n39"}'
    nodes = {cluster_client.keyslot(f"hash:{i}") // 5462 for i in range(40)}
    assert nodes == {0, 1, 2}  # the keys span the three masters
    assert sum(1 for _ in cluster_client.scan_iter("hash:*")) == 40

    with pytest.raises(Exception, match="cannot write to a Redis Cluster"):
        (df.write.format("redis").option("url", redis_cluster.url)
         .option("key", "tx:{order_id}").mode("append").save())  # fmt: skip
    df.write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema(SCHEMA).parquet(str(tmp_path / "in"))
    with pytest.raises(Exception, match="cannot write to a Redis Cluster") as refused:
        query = (
            stream.writeStream.format("redis").option("url", redis_cluster.url)
            .option("key", "tx:{order_id}").option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination(120)
        raise AssertionError("the query ran")  # awaitTermination raises the query's error
    assert '.option("mode", "idempotent")' in str(refused.value)
    assert not list(cluster_client.scan_iter("tx:*"))
