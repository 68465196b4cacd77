"""Flink's full cache and key affinity on a local Spark, against a real redis-server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from connectors.redis import RedisLookup
from enrich import FullCache
from enrich.spark import lookup_join

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def store(client: redis.Redis, keys: range) -> None:
    for key in keys:
        client.set(f"fu:{key}", json.dumps({"name": f"n{key}"}))


def users(url: str) -> RedisLookup:
    return RedisLookup(url, key_template="fu:{}", value="json", schema="name string")


def test_a_full_cache_answers_from_the_snapshot_and_never_asks_for_absent_keys(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    store(redis_client, range(0, 200, 2))  # even keys only
    df = spark.range(0, 400, numPartitions=4).selectExpr("id", "id % 200 AS k")
    out = lookup_join(df, users(redis_server.url), on="k", cache=FullCache(), how="left")
    rows = {(r.id, r.k, r.name) for r in out.collect()}
    assert rows == {(i, i % 200, f"n{i % 200}" if i % 2 == 0 else None) for i in range(400)}
    info = redis_client.info("stats")
    # Only SCAN's pages were read: the 200 lookups of odd keys never reached the server.
    assert info["keyspace_misses"] == 0
    # Whole loads of the 100 keys, one per Python worker that ran the join: how many
    # workers that is depends on what ran before (idle workers of earlier stages are reused).
    assert info["keyspace_hits"] > 0 and info["keyspace_hits"] % 100 == 0


def test_shuffle_routes_rows_by_key_and_keeps_each_keys_order(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    store(redis_client, range(7))
    # One input partition: its rows of a key reach the lookup in their input order.
    df = spark.range(0, 700, numPartitions=1).selectExpr("id", "id % 7 AS k")
    out = lookup_join(df, users(redis_server.url), on="k", shuffle=3, mode="ordered")
    assert out.rdd.getNumPartitions() == 3
    parts = out.rdd.mapPartitions(lambda rows: [[(r.k, r.id, r.name) for r in rows]]).collect()
    tasks = {k: {n for n, part in enumerate(parts) for r in part if r[0] == k} for k in range(7)}
    assert all(len(partitions) == 1 for partitions in tasks.values())  # one task per key
    for k in range(7):
        ids = [row[1] for part in parts for row in part if row[0] == k]
        assert ids == sorted(ids) and len(ids) == 100
    assert all(row[2] == f"n{row[0]}" for part in parts for row in part)
    with pytest.raises(ValueError, match="shuffle must be True, False or a partition count"):
        lookup_join(df, users(redis_server.url), on="k", shuffle=0)


def test_shuffle_in_a_stream_keeps_each_micro_batch_whole(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    store(redis_client, range(5))
    folder = tmp_path / "events"
    folder.mkdir()
    for batch in range(3):  # one file per micro-batch; keys 0-4 and a missing key 9
        keys = [i % 6 if i % 6 < 5 else 9 for i in range(12)]
        lines = [json.dumps({"event": batch * 100 + i, "k": k}) for i, k in enumerate(keys)]
        (folder / f"part-{batch}.json").write_text("\n".join(lines))
    events = spark.readStream.schema("event bigint, k bigint").option("maxFilesPerTrigger", 1)
    enriched = lookup_join(
        events.json(str(folder)), users(redis_server.url), on="k", shuffle=2, how="inner"
    )
    batches: list[tuple[int, list[tuple[int, str]]]] = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append((batch_id, sorted((r.event, r.name) for r in df.collect())))

    query = (
        enriched.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    # Each micro-batch holds exactly one file's rows, all of them, joined (key 9 finds
    # nothing): the shuffle happened inside each batch, none was split or merged.
    assert [batch_id for batch_id, _ in batches] == [0, 1, 2]
    files = []
    for _, rows in batches:
        [number] = {event // 100 for event, _ in rows}
        files.append(number)
        assert rows == [(number * 100 + i, f"n{i % 6}") for i in range(12) if i % 6 < 5]
    assert sorted(files) == [0, 1, 2]
