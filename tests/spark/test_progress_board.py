"""The source lag read from a query's progress: Kafka's offsets and the redis-stream's."""

from __future__ import annotations

import json

from enrich.spark.metrics.progress_board import source_lag


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
