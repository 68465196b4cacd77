"""``serve_metrics``: a scrape of /metrics agrees with ``statistics()`` exactly.

A real Spark job (a lookup join on a real Redis, some values not JSON) and a real HTTP
scrape, parsed by prometheus-client's own parser.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

pytest.importorskip("prometheus_client", reason="needs the metrics extra")

from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from connectors.redis import RedisLookup
from enrich import LookupCache
from enrich.spark import (
    lookup_join,
    register_data_sources,
    serve_metrics,
    statistics,
    stream_statistics,
)
from enrich.spark.metrics.exporter import LATENCY_BUCKETS

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def scrape(url: str) -> dict[str, list[Any]]:
    """Samples by sample name (``enrich_rows_in_total``, ``..._bucket``...)."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode()
    samples: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def value(samples: dict[str, list[Any]], name: str, **labels: str) -> float:
    found = [s.value for s in samples.get(name, []) if labels.items() <= s.labels.items()]
    assert len(found) == 1, (name, labels, samples.get(name))
    return float(found[0])


def test_a_scrape_agrees_with_statistics(
    spark: SparkSession, redis_server: Any, redis_client: Any
) -> None:
    for i in range(40):
        redis_client.set(f"pm:{i}", "not json" if i % 10 == 3 else json.dumps({"n": i}))
    source = RedisLookup(redis_server.url, key_template="pm:{}", value="json", schema="n int")
    df = spark.range(0, 60, numPartitions=3).selectExpr("id % 50 AS k")
    out = lookup_join(
        df,
        source,
        on="k",
        on_error="error_column",
        capacity=64,
        cache=LookupCache(max_rows=100),
        name="prom_users",
    )
    assert out.count() == 60
    with serve_metrics(spark, 0, address="127.0.0.1") as server:
        samples = scrape(server.url)
    metrics = statistics("prom_users")
    stage = {"stage": "prom_users", "store": "redis", "query": ""}
    assert value(samples, "enrich_rows_in_total", **stage) == metrics.rows_in == 60
    assert value(samples, "enrich_rows_out_total", **stage) == metrics.rows_out
    assert value(samples, "enrich_misses_total", **stage) == metrics.misses
    assert value(samples, "enrich_requests_total", **stage) == metrics.requests
    assert value(samples, "enrich_cache_hits_total", **stage) == metrics.cache_hits
    assert value(samples, "enrich_capacity", **stage) == 64

    # The session's other tests ran joins of their own: read this stage's series only.
    def ours(name: str) -> list[Any]:
        return [s for s in samples[name] if stage.items() <= s.labels.items()]

    errors = {s.labels["reason"]: s.value for s in ours("enrich_errors_total")}
    assert errors == dict(metrics.errors) and sum(errors.values()) == 5
    histogram = metrics.latency
    assert value(samples, "enrich_request_duration_seconds_count", **stage) == histogram.total
    assert value(samples, "enrich_request_duration_seconds_sum", **stage) == pytest.approx(
        histogram.seconds
    )
    buckets = {
        float(s.labels["le"]): s.value for s in ours("enrich_request_duration_seconds_bucket")
    }
    assert len(buckets) == len(LATENCY_BUCKETS) + 1 and buckets[float("inf")] == histogram.total
    counts = [buckets[le] for le in sorted(buckets)]
    assert counts == sorted(counts) and counts[-1] > 0


def test_a_taken_port_is_an_oserror(spark: SparkSession) -> None:
    with serve_metrics(spark, 0, address="127.0.0.1") as first, pytest.raises(OSError):
        serve_metrics(spark, first.port, address="127.0.0.1")


def test_a_scrape_carries_what_the_stream_source_counted(
    spark: SparkSession, redis_server: Any, redis_client: Any
) -> None:
    """The redis-stream source's counts reach the scrape through the driver's published
    counts (the exporter imports nothing of the source)."""
    register_data_sources(spark)  # the source, with the driver's accumulator
    spark_sources = spark
    stream = "prom_orders"
    redis_client.xadd(stream, {"n": "1"})
    redis_client.xadd(stream, {"n": "x"})  # malformed: kept with nulls (PERMISSIVE)
    df = (
        spark_sources.read.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", stream)
        .schema("stream_id string, n int")
        .load()
    )
    assert df.count() == 2
    counts = stream_statistics()[stream]
    with serve_metrics(spark_sources, 0, address="127.0.0.1") as server:
        samples = scrape(server.url)
    assert value(samples, "enrich_stream_entries_total", stream=stream) == counts.entries == 2
    assert value(samples, "enrich_stream_malformed_total", stream=stream) == counts.malformed == 1
    assert value(samples, "enrich_stream_dropped_total", stream=stream) == 0
