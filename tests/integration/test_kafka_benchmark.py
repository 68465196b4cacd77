"""The Kafka benchmark's hand-written consumer computes what the lookup_join path writes
(``order_id,ts,name``, the name of user ``order_id * 7919 % 100000``, empty for a
missing user), each record once, against a real broker and Redis; and the report flags
a missed target. Tiny sizes: a smoke test of the benchmark's code, not a timing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks import _kafka_backlog as backlog
from benchmarks.kafka import report
from enrich.demo.dimension_service import user
from tests.support.kafka_fixtures import consume, create_topic, kafka_broker, kafka_topic

__all__ = ("kafka_broker", "kafka_topic")

pytestmark = pytest.mark.timeout(120)
RECORDS = 60
MISSING = {3, 17}  # orders whose user is not in Redis


@pytest.mark.slow  # a broker's start and two consumer processes: ~30 s on 2 busy cores
def test_the_hand_written_consumer_writes_each_enriched_record_once(
    kafka_broker: Any, kafka_topic: str, redis_client: Any, redis_server: Any
) -> None:
    for order in range(RECORDS):
        if order not in MISSING:
            uid = order * 7919 % 100_000
            redis_client.set(f"user:{uid}", json.dumps(user(uid)))
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=2)
    backlog.fill(kafka_broker.bootstrap, kafka_topic, RECORDS)

    got = backlog.hand_path(kafka_broker.bootstrap, redis_server.url, kafka_topic)

    assert (got["lost"], got["duplicates"]) == (0, 0)
    values = consume(kafka_broker.bootstrap, got["topic"], RECORDS)
    names = {int(v.split(b",")[0]): v.decode().split(",")[2] for v in values}
    expected = {o: "" if o in MISSING else f"user-{o * 7919 % 100_000}" for o in range(RECORDS)}
    assert names == expected


def run(rate: int, path: str, p50: float, p99: float) -> dict[str, Any]:
    return {"rate": rate, "path": path, "round": 0, "when": "2026-11-27 22:00", "seconds": 20,
            "produced": 10, "lost": 0, "duplicates": 0, "p50": p50, "p99": p99,
            "first_p99": p99, "batch_ms": 100.0, "batch_rows": 10, "load": 1.0}  # fmt: skip


def test_the_report_says_whether_the_10000_per_second_target_is_met() -> None:
    record = {"runs": [run(10_000, "spark", 100, 300), run(10_000, "join", 120, 360),
                       run(10_000, "redis", 200, 360)]}  # fmt: skip
    ratios = dict(report(record))["Against Spark's own kafka -> kafka at the same rate, same round"]
    join, redis_row = ratios.splitlines()[2:4]
    assert "| 1.20x | 1.20x | 360 | yes |" in join
    assert "| 2.00x | 1.20x | 360 | no |" in redis_row


def test_the_kafka_sink_path_is_measured_and_reported_as_the_others() -> None:
    from benchmarks._kafka_runs import fields

    # its values are the JSON of order_id, ts, name; Spark's sink's are order_id,ts,name
    assert fields(b'{"order_id":7,"ts":1700000000123,"name":null}') == (7, 1700000000123)
    assert fields(b"7,1700000000123,user-7") == (7, 1700000000123)
    record = {"runs": [run(10_000, "spark", 100, 300), run(10_000, "kafka", 110, 330)]}
    ratios = dict(report(record))["Against Spark's own kafka -> kafka at the same rate, same round"]
    assert 'low_latency(sink="kafka") | 1.10x | 1.10x | 330 | yes |' in ratios


def test_the_report_gives_the_medians_of_a_runs_rounds() -> None:
    rounds = [(100, 300, 150, 330), (40, 80, 60, 120), (50, 90, 70, 100)]
    runs = [
        {**run(10_000, path, p50, p99), "round": n}
        for n, (s50, s99, j50, j99) in enumerate(rounds)
        for path, p50, p99 in (("spark", s50, s99), ("join", j50, j99))
    ]
    medians = dict(report({"runs": runs}))["Medians of the rounds of one run, against Spark's own"]
    spark_row, join_row = medians.splitlines()[2:4]
    assert "| Spark's own kafka -> kafka (no Python stage) | 3 | 50 | 90 | 1.00x | 1.00x |" in (
        spark_row
    )
    # medians 70 / 120 against Spark's 50 / 90, whatever round each came from
    assert "| kafka -> lookup_join -> kafka | 3 | 70 | 120 | 1.40x | 1.33x | yes |" in join_row
    # a run of one round has no medians table
    assert "Medians of the rounds of one run, against Spark's own" not in dict(
        report({"runs": [run(10_000, "spark", 1, 1), run(10_000, "join", 1, 1)]})
    )
