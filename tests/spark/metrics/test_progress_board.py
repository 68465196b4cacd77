"""The source lag read from a query's progress: Kafka's offsets and the redis-stream's."""

from __future__ import annotations

import json
from typing import Any

import redis
from pyspark.sql.types import StringType, StructField, StructType

from enrich.spark.metrics.progress_board import ADDED_KEY, source_lag
from enrich.spark.streams.loss import ADDED_KEY as SOURCE_ADDED_KEY
from enrich.spark.streams.stream_source import RedisStreamReader, StreamSettings

ID_ONLY = StructType([StructField("stream_id", StringType())])


def test_kafka_lag_sums_the_partitions_behind() -> None:
    source = {
        "description": "KafkaV2[Subscribe[orders]]",
        "endOffset": json.dumps({"orders": {"0": 100, "1": 250}}),
        "latestOffset": json.dumps({"orders": {"0": 130, "1": 250}}),
    }
    assert source_lag(source) == 30


def test_redis_stream_lag_counts_entries_added_beyond_the_end() -> None:
    end = {"orders": "1-5", "@added": {"orders": 5}}
    latest = {"orders": "1-9", "@added": {"orders": 9}}
    source = {"endOffset": json.dumps(end), "latestOffset": json.dumps(latest)}
    assert source_lag(source) == 4


def test_redis_stream_without_entries_added_knows_only_when_caught_up() -> None:
    latest = '{"orders": "1-9", "@added": {}}'  # Redis 6.2 counts no entries added
    assert source_lag({"endOffset": '{"orders": "1-9"}', "latestOffset": latest}) == 0
    assert source_lag({"endOffset": '{"orders": "1-5"}', "latestOffset": latest}) is None


def test_a_source_that_reports_no_latest_offset_has_no_lag() -> None:
    assert source_lag({"endOffset": '{"orders": "1-5"}', "latestOffset": None}) is None
    assert source_lag({"endOffset": "5", "latestOffset": "7"}) is None


def test_the_redis_stream_source_reports_its_lag_behind_a_bounded_batch(
    redis_server: Any, redis_client: redis.Redis
) -> None:
    for order in range(10):
        redis_client.xadd("orders", {"order_id": order})
    options = {"url": redis_server.url, "stream": "orders", "maxEntriesPerTrigger": "4"}
    reader = RedisStreamReader(StreamSettings.of(options), ID_ONLY)
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        progress = {"endOffset": json.dumps(end), "latestOffset": reader.reportLatestOffset()}
        assert source_lag(progress) == 6  # 10 entries, 4 in the batch
        redis_client.xadd("orders", {"order_id": 10})
        progress["latestOffset"] = reader.reportLatestOffset()
        assert source_lag(progress) == 7
        last = reader.latestOffset(end, None)
        assert source_lag({**progress, "endOffset": last}) == 0
    finally:
        reader.stop()


def test_the_board_reads_the_offsets_field_the_source_writes() -> None:
    assert ADDED_KEY == SOURCE_ADDED_KEY
