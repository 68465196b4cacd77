"""Streaming queries over a real Redis whose stream loses entries while the query is down:
the restart fails naming the loss (``failOnDataLoss``, default true) or goes on counting
it in the offsets it logs (``failOnDataLoss=false``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from enrich.spark import register_data_sources

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SCHEMA = "stream_id string, n long"


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


def add(client: redis.Redis, n: int, start: int = 0) -> list[str]:
    return [client.xadd("orders", {"n": i}).decode() for i in range(start, start + n)]


def run(spark: SparkSession, url: str, tmp_path: Path, **options: str) -> Any:
    reader = spark.readStream.format("redis-stream").option("url", url).option("stream", "orders")
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.schema(SCHEMA)
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    return query


def written(spark: SparkSession, tmp_path: Path) -> list[int]:
    return sorted(r.n for r in spark.read.parquet(str(tmp_path / "out")).collect())


def end_offsets(query: Any) -> list[dict[str, Any]]:
    return [json.loads(p["sources"][0]["endOffset"]) for p in query.recentProgress]


def is7(client: redis.Redis) -> bool:
    return int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7


def test_a_trim_past_the_committed_offset_fails_the_restart_or_is_counted(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    url = redis_server.url
    first = add(redis_client, 10)
    query = run(spark_sources, url, tmp_path)
    assert all("@dataLoss" not in o for o in end_offsets(query))  # no trims, no loss
    later = add(redis_client, 10, start=10)
    redis_client.xtrim("orders", maxlen=5, approximate=False)  # 5 unread entries trimmed

    with pytest.raises(StreamingQueryException) as failure:
        run(spark_sources, url, tmp_path)
    message = str(failure.value)
    assert "data loss in stream 'orders'" in message
    assert ("5 entries after" in message) == is7(redis_client)
    assert f"committed offset {first[-1]}" in message
    assert f"first entry still present: {later[5]}" in message

    query = run(spark_sources, url, tmp_path, failOnDataLoss="false")
    assert query.exception() is None
    assert written(spark_sources, tmp_path) == [*range(10), *range(15, 20)]
    (end,) = [o for o in end_offsets(query) if o.get("orders") == later[-1]]
    exact = {"entries": 5} if is7(redis_client) else {}  # 7.0 counts them
    assert end["@dataLoss"] == {"orders": {"count": 1, "mark": later[5], **exact}}


def test_a_deleted_stream_fails_the_restart(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ids = add(redis_client, 4)
    run(spark_sources, redis_server.url, tmp_path)
    redis_client.delete("orders")
    with pytest.raises(StreamingQueryException, match=f"offset {ids[-1]} no longer exist"):
        run(spark_sources, redis_server.url, tmp_path)


def test_xdel_of_one_unread_entry_fails_the_restart_on_redis_7(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    if not is7(redis_client):
        pytest.skip("Redis 6.2 cannot see an XDEL between the first and the last entry")
    add(redis_client, 4)
    run(spark_sources, redis_server.url, tmp_path)
    later = add(redis_client, 4, start=4)
    redis_client.xdel("orders", later[1])
    with pytest.raises(StreamingQueryException, match=f"deleted up to {later[1]}"):
        run(spark_sources, redis_server.url, tmp_path)


def test_a_recreated_stream_is_read_from_its_start_when_going_on(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add(redis_client, 4)
    run(spark_sources, redis_server.url, tmp_path)
    redis_client.delete("orders")
    redis_client.xadd("orders", {"n": 100}, id="1-1")
    redis_client.xadd("orders", {"n": 101}, id="1-2")
    with pytest.raises(StreamingQueryException, match="deleted and recreated"):
        run(spark_sources, redis_server.url, tmp_path)
    run(spark_sources, redis_server.url, tmp_path, failOnDataLoss="FALSE")
    assert written(spark_sources, tmp_path) == [0, 1, 2, 3, 100, 101]


def test_earliest_on_a_stream_trimmed_before_the_query_began_is_no_loss(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add(redis_client, 10)
    redis_client.xtrim("orders", maxlen=3, approximate=False)
    query = run(spark_sources, redis_server.url, tmp_path)
    assert query.exception() is None
    assert written(spark_sources, tmp_path) == [7, 8, 9]
    redis_client.xtrim("orders", maxlen=1, approximate=False)  # behind the committed offset
    add(redis_client, 2, start=10)
    run(spark_sources, redis_server.url, tmp_path)
    assert written(spark_sources, tmp_path) == [7, 8, 9, 10, 11]


def test_a_bad_fail_on_data_loss_names_the_option(
    spark_sources: SparkSession, redis_server: Any, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match="failOnDataLoss must be true or false"):
        run(spark_sources, redis_server.url, tmp_path, failOnDataLoss="maybe")
