"""The redis-stream source and the redis sink on the shared local Spark, against a real Redis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import DataFrame, SparkSession

from connectors.redis import RedisLookup
from enrich.spark import lookup_join, register_data_sources
from enrich.spark.sink.redis.row_writes import SinkSettings
from enrich.spark.sink.redis.two_phase import committed_batch, index_key
from tests.support.spark_version import requires_spark

pytestmark = [
    pytest.mark.spark,
    pytest.mark.timeout(240),
    requires_spark(4, 1, "the Redis data sources: Python Data Source API, Arrow stream writer"),
]

SCHEMA = "stream_id string, order_id long, user_id long, amount double"


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


def add_orders(client: redis.Redis, n: int, stream: str = "orders", start: int = 0) -> None:
    for i in range(start, start + n):
        client.xadd(stream, {"order_id": i, "user_id": i % 3, "amount": f"{i}.5"})


def orders_stream(spark: SparkSession, url: str, **options: Any) -> DataFrame:
    reader = spark.readStream.format("redis-stream").option("url", url).option("stream", "orders")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.schema(SCHEMA).load()


def run(df: DataFrame, url: str, checkpoint: Path, **options: Any) -> Any:
    writer = df.writeStream.format("redis").option("url", url)
    writer = writer.option("checkpointLocation", str(checkpoint))
    for name, value in options.items():
        writer = writer.option(name, value)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination(180)
    return query


def entries(client: redis.Redis, stream: str) -> list[dict[str, str]]:
    return [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in client.xrange(stream, "-", "+")
    ]


def test_batch_read_without_schema_gives_ids_and_field_maps(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    add_orders(redis_client, 5)
    df = (
        spark_sources.read.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "orders")
        .load()
    )
    assert df.schema.simpleString() == "struct<stream_id:string,fields:map<string,string>>"
    rows = df.collect()
    ids = [i.decode() for i, _ in redis_client.xrange("orders", "-", "+")]
    assert [r.stream_id for r in rows] == ids
    assert rows[4].fields == {"order_id": "4", "user_id": "1", "amount": "4.5"}


def test_user_schema_types_fields_and_nulls_bad_or_missing_ones(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    redis_client.xadd("orders", {"order_id": "1", "user_id": "7", "amount": "2.5"})
    redis_client.xadd("orders", {"order_id": "x1", "amount": "abc"})  # bad, missing, bad
    df = (
        spark_sources.read.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "orders")
        .schema(SCHEMA)
        .load()
    )
    assert df.columns == ["stream_id", "order_id", "user_id", "amount"]
    good, bad = df.collect()
    assert (good.order_id, good.user_id, good.amount) == (1, 7, 2.5)
    assert (bad.order_id, bad.user_id, bad.amount) == (None, None, None)
    assert bad.stream_id.endswith("-0") or "-" in bad.stream_id


def test_stream_id_must_be_a_string_column(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    reader = (
        spark_sources.read.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "orders")
        .schema("stream_id long")
    )
    with pytest.raises(Exception, match="stream_id"):
        reader.load().collect()


@requires_spark(4, 2, "maxEntriesPerTrigger rides on the read limits of Python stream readers")
def test_micro_batches_respect_max_entries_and_several_streams(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add_orders(redis_client, 30)
    add_orders(redis_client, 10, stream="returns", start=100)
    df = (
        spark_sources.readStream.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "orders,returns")
        .option("maxEntriesPerTrigger", 20)
        .schema(SCHEMA)
        .load()
    )
    query = run(df, redis_server.url, tmp_path / "ck", stream="out")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 20 and sum(sizes) == 40
    ids = sorted(int(e["order_id"]) for e in entries(redis_client, "out"))
    assert ids == [*range(30), *range(100, 110)]


def test_a_restarted_query_reads_only_new_entries_and_appends_each_once(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add_orders(redis_client, 12)
    url = redis_server.url
    run(
        orders_stream(spark_sources, url, maxEntriesPerTrigger=5),
        url,
        tmp_path / "ck",
        stream="out",
    )
    add_orders(redis_client, 4, start=12)
    run(
        orders_stream(spark_sources, url, maxEntriesPerTrigger=5),
        url,
        tmp_path / "ck",
        stream="out",
    )
    assert [int(e["order_id"]) for e in entries(redis_client, "out")] == list(range(16))
    settings = SinkSettings.of(
        {"url": url, "stream": "out", "checkpointLocation": str(tmp_path / "ck")}
    )
    assert committed_batch(redis_client, settings.identity) is not None
    assert redis_client.scard(index_key(settings.identity)) == 0
    assert not [k for k in redis_client.keys("enrich:sink:*:staging:*")]


def test_starting_position_latest_skips_what_is_there(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add_orders(redis_client, 6)
    url = redis_server.url
    query = run(orders_stream(spark_sources, url, startingPosition="latest"), url,
                tmp_path / "ck", stream="out")  # fmt: skip
    assert query.exception() is None
    assert redis_client.xlen("out") == 0


def test_key_target_upserts_hashes_and_json(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add_orders(redis_client, 6)
    url = redis_server.url
    df = orders_stream(spark_sources, url).drop("stream_id")
    run(df, url, tmp_path / "a", key="order:{order_id}", value="hash", mode="transactional")
    assert redis_client.hgetall("order:4") == {b"order_id": b"4", b"user_id": b"1",
                                                 b"amount": b"4.5"}  # fmt: skip
    run(df, url, tmp_path / "b", key="doc:{user_id}:{order_id}", value="json", mode="idempotent")
    assert json.loads(redis_client.get("doc:2:5") or b"") == {
        "order_id": 5,
        "user_id": 2,
        "amount": 5.5,
    }
    assert len(redis_client.keys("order:*")) == 6 and len(redis_client.keys("doc:*")) == 6


def test_failed_lookups_go_to_the_dead_letter_stream_in_the_same_commit(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add_orders(redis_client, 6)
    for user in range(3):  # user 1's value does not decode
        redis_client.set(f"user:{user}", "not json" if user == 1 else json.dumps({"tier": "t"}))
    users = RedisLookup(redis_server.url, key_template="user:{}", value="json",
                        schema="tier string")  # fmt: skip
    url = redis_server.url
    joined = lookup_join(orders_stream(spark_sources, url), users, on="user_id",
                         on_error="error_column")  # fmt: skip
    run(joined, url, tmp_path / "ck", stream="enriched", dead_letter="orders-dlq")
    good = entries(redis_client, "enriched")
    bad = entries(redis_client, "orders-dlq")
    assert sorted(int(e["order_id"]) for e in good) == [0, 2, 3, 5]
    assert sorted(int(e["order_id"]) for e in bad) == [1, 4]
    assert all(e["enrich_error"].startswith("decode") for e in bad)


def test_bad_options_name_the_option(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    add_orders(redis_client, 2)
    df = orders_stream(spark_sources, redis_server.url)
    with pytest.raises(Exception, match="exactly one target"):
        run(df, redis_server.url, tmp_path / "a")
    with pytest.raises(Exception, match="order_no"):
        run(df, redis_server.url, tmp_path / "b", key="order:{order_no}")
    with pytest.raises(Exception, match="maxEntriesPerTrigger"):
        bad = orders_stream(spark_sources, redis_server.url, maxEntriesPerTrigger="-3")
        run(bad, redis_server.url, tmp_path / "c", stream="out")


def test_secrets_stay_out_of_plans_and_errors(spark_sources: SparkSession, tmp_path: Path) -> None:
    secret = "pa55-S3CRET-eo"
    url = f"redis://:{secret}@127.0.0.1:1/0"  # nothing listens: the read fails
    df = (
        spark_sources.read.format("redis-stream")
        .option("url", url)
        .option("stream", "orders")
        .schema(SCHEMA)
        .load()
    )
    assert secret not in df._jdf.queryExecution().toString()
    with pytest.raises(Exception) as failure:
        df.collect()
    assert secret not in str(failure.value)
    settings = SinkSettings.of({"url": url, "stream": "out"})
    assert secret not in repr(settings)
    with pytest.raises(ValueError) as bad:
        SinkSettings.of({"url": f"redis://:{secret}@h:1/0?x=1", "stream": "out"})
    assert secret not in str(bad.value)


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


def test_a_replayed_batch_never_appends_to_a_killed_attempts_staging(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """A restarted application numbers task attempts from zero again: the replay of batch 1,
    partition 0 may get the attempt id a killed run's write of it had. The killed write's
    staged rows must not be published with the replay's (the soak once saw them twice)."""
    import pyspark
    from pyspark.sql.types import LongType, StructField, StructType

    from enrich.spark.sink.redis.data_source import RedisStreamWriter
    from enrich.spark.sink.redis.two_phase import staging_prefix

    url = redis_server.url
    options = {
        "url": url, "stream": "out", "mode": "transactional",
        "checkpointLocation": str(tmp_path / "ck"),
    }  # fmt: skip
    settings = SinkSettings.of(options)
    schema = StructType([StructField("order_id", LongType())])
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Task(0, 7, "1")))

    killed = RedisStreamWriter(settings, schema, None)
    killed.write(iter([pyspark.sql.Row(order_id=i) for i in range(5)]))  # never committed
    replay = RedisStreamWriter(settings, schema, None)
    message = replay.write(iter([pyspark.sql.Row(order_id=i) for i in range(5)]))
    replay.commit([message], 1)

    published = sorted(int(e["order_id"]) for e in entries(redis_client, "out"))
    assert published == [0, 1, 2, 3, 4]
    assert not list(redis_client.scan_iter(f"{staging_prefix(settings.identity)}*"))
