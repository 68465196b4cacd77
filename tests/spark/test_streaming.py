"""Streaming queries enriched end to end; the per-process runtime across micro-batches;
metrics on the driver per micro-batch."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import DataFrame, SparkSession

from connectors.redis import RedisLookup
from enrich import JoinMetrics, LookupCache
from enrich.spark import EnrichMetricsListener, batch_statistics, lookup_join, statistics
from tests.spark.sources import PidSource

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

KEYS = ["u1", "u2", "u3", "nobody"]


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def event_files(tmp_path: Path, batches: int) -> Path:
    """One JSON file per micro-batch; each holds every key of KEYS once, and a new key."""
    folder = tmp_path / "events"
    folder.mkdir()
    for b in range(batches):
        keys = [*KEYS, f"fresh{b}"]
        rows = [{"event": b * 100 + i, "user_id": k} for i, k in enumerate(keys)]
        (folder / f"part-{b}.json").write_text("\n".join(json.dumps(r) for r in rows))
    return folder


def stream(spark: SparkSession, folder: Path) -> DataFrame:
    return (
        spark.readStream.schema("event bigint, user_id string")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
    )


@pytest.fixture
def listener(spark: SparkSession) -> Iterator[tuple[EnrichMetricsListener, Lines]]:
    lines = Lines()
    logger = logging.getLogger("tests.spark.metrics")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    added = EnrichMetricsListener(logger)
    spark.streams.addListener(added)
    yield added, lines
    spark.streams.removeListener(added)
    logger.removeHandler(lines)


def wait_for(predicate: Any, what: str, timeout: float = 120.0) -> None:
    # The listener bus is asynchronous: there is no event to wait on from here.
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


BATCHES = 8


def test_a_stream_is_enriched_and_workers_keep_their_runtime(
    spark: SparkSession,
    redis_server: Any,
    redis_client: redis.Redis,
    tmp_path: Path,
    listener: tuple[EnrichMetricsListener, Lines],
) -> None:
    for key in KEYS[:3]:
        redis_client.set(f"user:{key}", json.dumps({"name": key.upper()}))
    # Settings of its own (the odd timeout): this test's connection pools are new.
    users = RedisLookup(
        redis_server.url, key_template="user:{}", value="json", schema="name string", timeout=4.321
    )
    cache = LookupCache(max_rows=100, ttl=600, cache_missing=True)
    enriched = lookup_join(
        stream(spark, event_files(tmp_path, BATCHES)),
        users,
        on="user_id",
        cache=cache,
        name="stream_users",
    )
    enriched = lookup_join(enriched, PidSource(), on="user_id", name="stream_pids")
    seen: dict[int, list[Any]] = {}
    connections: dict[int, int] = {}

    def sink(batch: DataFrame, batch_id: int) -> None:
        seen[batch_id] = batch.collect()
        connections[batch_id] = redis_client.info("stats")["total_connections_received"]

    query = (
        enriched.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(seen) == list(range(BATCHES))
    fresh = sorted(r.user_id for rows in seen.values() for r in rows if "fresh" in r.user_id)
    assert fresh == [f"fresh{b}" for b in range(BATCHES)]  # files come in any order
    for rows in seen.values():
        assert sorted((r.user_id, r.name) for r in rows if "fresh" not in r.user_id) == [
            ("nobody", None),
            ("u1", "U1"),
            ("u2", "U2"),
            ("u3", "U3"),
        ]
    # Python workers serve micro-batch after micro-batch (Spark hands out idle workers
    # first in, first out, so they take turns) ...
    pids = {r.pid for rows in seen.values() for r in rows}
    assert len(pids) < BATCHES, pids
    # ... and keep their runtime: a worker's cache answers the keys it looked up in an
    # earlier micro-batch (each file holds each key once: a hit can only come from an
    # earlier batch), and its connection pool serves the new key of each batch, so a
    # connection is opened only by a batch served by a worker new to this join.
    per_batch = [batch_statistics("stream_users", str(query.id), b) for b in range(BATCHES)]
    hits = [m.cache_hits if m is not None else -1 for m in per_batch]
    assert all(h in (0, 4) for h in hits) and hits.count(4) >= 1, hits
    new_workers = hits[1:].count(0)
    assert connections[BATCHES - 1] - connections[0] == new_workers, (connections, hits)
    total = statistics("stream_users")
    assert total.rows_in == 5 * BATCHES and total.cache_hits == sum(hits), total.summary()
    # The listener logged one line per join and micro-batch, with that batch's numbers.
    wait_for(lambda: listener[0].batches >= BATCHES, "a progress event per batch")
    users_lines = [line for line in listener[1].lines if "stream_users:" in line]
    assert len(users_lines) == BATCHES, listener[1].lines
    assert all("rows 5->5" in line for line in users_lines), users_lines
    last = listener[0].last_batch("stream_users")
    assert isinstance(last, JoinMetrics) and last.rows_in == 5
    first = per_batch[0]
    assert first is not None and (first.rows_in, first.misses, first.requests) == (5, 2, 1)


def test_streaming_sql_function(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    from enrich.spark.sql.lookup_udf import register_lookup

    for key in KEYS[:2]:
        redis_client.set(f"user:{key}", json.dumps({"name": key.upper(), "tier": "gold"}))
    users = RedisLookup(
        redis_server.url, key_template="user:{}", value="json", schema="name string, tier string"
    )
    register_lookup(spark, "dim_user_stream", users)
    stream(spark, event_files(tmp_path, 2)).createOrReplaceTempView("events_stream")
    enriched = spark.sql(
        "SELECT e.event, e.user_id, e.u.name AS name FROM "
        "(SELECT *, dim_user_stream(user_id) AS u FROM events_stream) e WHERE e.u IS NOT NULL"
    )
    query = (
        enriched.writeStream.format("memory")
        .queryName("enriched_sql_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    got = spark.sql("SELECT * FROM enriched_sql_stream").collect()
    assert sorted((r.event, r.name) for r in got) == [
        (0, "U1"),
        (1, "U2"),
        (100, "U1"),
        (101, "U2"),
    ]
