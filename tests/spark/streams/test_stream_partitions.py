"""The redis-stream source splits each stream's range of a batch into several partitions,
by entry-id arithmetic alone, so a replay reads the same entries in each partition."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from enrich.spark import register_data_sources
from enrich.spark.streams.loss import FROM_KEY
from enrich.spark.streams.read import LAST_SEQ, split_range
from enrich.spark.streams.stream_source import RedisStreamReader, StreamSettings
from tests.support.stream_rows import rows_of

pytestmark = [pytest.mark.timeout(240)]

ID_ONLY = StructType([StructField("stream_id", StringType())])


def covered(ranges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Consecutive: each range begins where the previous ended."""
    for (_, end), (begin, _) in itertools.pairwise(ranges):
        assert end == begin
    return ranges


def test_a_range_is_cut_evenly_at_whole_milliseconds() -> None:
    assert covered(split_range("100-5", "110-3", 4)) == [
        ("100-5", f"102-{LAST_SEQ}"),
        (f"102-{LAST_SEQ}", f"105-{LAST_SEQ}"),
        (f"105-{LAST_SEQ}", f"107-{LAST_SEQ}"),
        (f"107-{LAST_SEQ}", "110-3"),
    ]


def test_close_ids_give_fewer_ranges_and_an_empty_range_none() -> None:
    assert split_range("100-5", "101-3", 4) == [("100-5", f"100-{LAST_SEQ}"),
                                               (f"100-{LAST_SEQ}", "101-3")]  # fmt: skip
    assert split_range("100-5", "100-9", 4) == [("100-5", "100-9")]
    assert split_range("100-5", "100-5", 4) == []
    assert split_range("100-5", "200-0", 1) == [("100-5", "200-0")]


def test_a_range_from_nothing_is_cut_from_its_first_entry() -> None:
    ranges = covered(split_range("0-0", "1100-0", 2, first="1000-0"))
    assert ranges == [("0-0", f"1050-{LAST_SEQ}"), (f"1050-{LAST_SEQ}", "1100-0")]


def fill(client: redis.Redis, n: int, start_ms: int = 1000) -> list[str]:
    pipe = client.pipeline()
    for i in range(n):
        pipe.xadd("orders", {"n": i}, id=f"{start_ms + i}-0")
    pipe.execute()
    return [f"{start_ms + i}-0" for i in range(n)]


def read_all(reader: RedisStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
    return [[r[0] for r in rows_of(reader.read(p))] for p in reader.partitions(start, end)]


def test_a_replay_reads_the_same_entries_in_each_partition(
    redis_server: Any, redis_client: redis.Redis
) -> None:
    ids = fill(redis_client, 100)
    options = {"url": redis_server.url, "stream": "orders", "partitionsPerStream": "4"}
    reader = RedisStreamReader(StreamSettings.of(options), ID_ONLY)
    start = {"orders": ids[9]}
    end = reader.latestOffset(start)
    first = read_all(reader, start, end)
    assert [len(p) for p in first] == [22, 23, 22, 23]
    assert [i for part in first for i in part] == ids[10:]
    fill(redis_client, 50, start_ms=2000)  # more entries change nothing in a replay
    assert read_all(reader, start, end) == first
    reader.stop()


def test_a_first_batch_from_earliest_is_split_from_the_first_entry(
    redis_server: Any, redis_client: redis.Redis
) -> None:
    ids = fill(redis_client, 40)
    options = {"url": redis_server.url, "stream": "orders", "partitionsPerStream": "2"}
    reader = RedisStreamReader(StreamSettings.of(options), ID_ONLY)
    start = reader.initialOffset()
    end = reader.latestOffset(start)
    assert start == {"orders": "0-0"} and end[FROM_KEY] == {"orders": ids[0]}
    assert [len(p) for p in read_all(reader, start, end)] == [20, 20]
    assert reader.latestOffset(end) == end  # nothing new: the same offset, no batch
    reader.stop()


def test_partitions_per_stream_defaults_to_the_session_parallelism() -> None:
    options = {"url": "redis://127.0.0.1:1/0", "stream": "a,b,c"}
    assert StreamSettings.of(options, parallelism=8).partitions == 3
    assert StreamSettings.of({**options, "stream": "a"}, parallelism=8).partitions == 8
    with pytest.raises(ValueError, match="partitionsPerStream must be a positive integer"):
        StreamSettings.of({**options, "partitionsPerStream": "0"})


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


@pytest.mark.spark
def test_a_batch_read_uses_the_sessions_parallelism_or_the_option(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    ids = fill(redis_client, 60)
    reader = spark_sources.read.format("redis-stream").option("url", redis_server.url)
    df = reader.option("stream", "orders").schema("stream_id string, n long").load()
    assert df.rdd.getNumPartitions() == 2  # local[2]'s default parallelism
    assert [r.stream_id for r in df.collect()] == ids
    three = reader.option("stream", "orders").option("partitionsPerStream", 3).load()
    assert three.rdd.getNumPartitions() == 3
    assert [r.stream_id for r in three.collect()] == ids


@pytest.mark.spark
def test_a_partitioned_streaming_query_writes_each_entry_once(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ids = fill(redis_client, 90)

    def run() -> Any:
        query = (
            spark_sources.readStream.format("redis-stream")
            .option("url", redis_server.url)
            .option("stream", "orders")
            .option("partitionsPerStream", 3)
            .option("maxEntriesPerTrigger", 40)
            .schema("stream_id string, n long")
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        return query

    run()
    more = fill(redis_client, 30, start_ms=5000)
    run()
    rows = spark_sources.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.stream_id for r in rows) == sorted(ids + more)
