"""Each commit script is bounded, not the batch: the sink publishes a transactional
batch of any size in steps of at most ``maxRowsPerCommit`` rows (1,000 by default), the
``redis-stream`` source reads all it has by default (``maxEntriesPerTrigger``: no limit, as
Kafka's), and a bounded batch is cut into equal shares by the ids it counted (``@cuts``).
Only ``atomicCommit`` with an explicit ``maxRowsPerCommit`` refuses a batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from enrich.spark import register_data_sources
from enrich.spark.sink.redis.data_source import RedisStreamWriter
from enrich.spark.sink.redis.row_writes import STEP_ROWS, SinkSettings
from enrich.spark.sink.redis.two_phase import CommitTooLarge, committed_batch, index_key
from enrich.spark.streams.loss import CUTS_KEY
from enrich.spark.streams.stream_source import RedisStreamReader, StreamSettings
from tests.spark.sink.test_sink_commit import SCHEMA, _stage
from tests.spark.streams.test_stream_partitions import ID_ONLY, read_all
from tests.support.spark_version import requires_spark

pytestmark = [pytest.mark.timeout(300)]


def sink(redis_server: Any, tmp_path: Path, **options: str) -> SinkSettings:
    base = {"url": redis_server.url, "stream": "out", "checkpointLocation": str(tmp_path)}
    return SinkSettings.of({**base, **options})


def staging_left(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter("enrich:sink:*:staging:*"))


def test_the_defaults_bound_a_step_not_a_batch(redis_server: Any) -> None:
    url = redis_server.url
    assert STEP_ROWS == 1_000
    default = SinkSettings.of({"url": url, "stream": "out"})
    assert (default.max_rows, default.atomic) == (STEP_ROWS, False)
    assert SinkSettings.of({"url": url, "stream": "out", "maxRowsPerCommit": "0"}).max_rows is None
    atomic = SinkSettings.of({"url": url, "stream": "out", "atomicCommit": "TRUE"})
    assert (atomic.max_rows, atomic.atomic) == (None, True)  # no refusal unless asked
    limited = {"url": url, "stream": "out", "atomicCommit": "true", "maxRowsPerCommit": "10"}
    assert SinkSettings.of(limited).max_rows == 10
    assert StreamSettings.of({"url": url, "stream": "s"}).max_entries is None
    bounded = StreamSettings.of({"url": url, "stream": "s", "maxEntriesPerTrigger": "5000"})
    assert bounded.max_entries == 5000
    for bad in ("-1", "lots"):
        with pytest.raises(ValueError, match=f"option maxRowsPerCommit .* got '{bad}'"):
            SinkSettings.of({"url": url, "stream": "out", "maxRowsPerCommit": bad})
        with pytest.raises(ValueError, match=f"option maxEntriesPerTrigger .* got '{bad}'"):
            StreamSettings.of({"url": url, "stream": "s", "maxEntriesPerTrigger": bad})


def test_an_atomic_batch_over_its_limit_publishes_nothing_and_leaves_no_staging(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """Each task stays under the limit; their sum does not: the driver refuses it."""
    settings = sink(redis_server, tmp_path, maxRowsPerCommit="1000", atomicCommit="true")
    messages = _stage(settings, monkeypatch, "3", [range(0, 700), range(700, 1300)])
    with pytest.raises(CommitTooLarge) as refused:
        RedisStreamWriter(settings, SCHEMA, None).commit(messages, 3)
    error = refused.value
    assert (error.batch, error.rows, error.limit) == ("3", 1300, 1000)
    text = str(error)
    assert "batch 3 holds 1,300 rows" in text and "maxRowsPerCommit (1,000)" in text
    assert "atomicCommit" in text and "maxEntriesPerTrigger" in text
    assert redis_client.xlen("out") == 0
    assert committed_batch(redis_client, settings.identity) is None
    assert staging_left(redis_client) == []
    assert redis_client.scard(index_key(settings.identity)) == 0


def test_an_atomic_task_over_the_limit_stops_staging_at_once(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = sink(redis_server, tmp_path, maxRowsPerCommit="1200", atomicCommit="true")
    with pytest.raises(CommitTooLarge, match="batch 5 holds 1,500 rows or more"):
        _stage(settings, monkeypatch, "5", [range(5000)])
    staged = staging_left(redis_client)
    assert len(staged) == 1 and redis_client.llen(staged[0]) <= 1200  # not the 5,000
    # Spark aborts the batch with no message from the failed task: its staging goes too.
    RedisStreamWriter(settings, SCHEMA, None).abort([None], 5)
    assert staging_left(redis_client) == [] and redis_client.xlen("out") == 0


def test_the_defaults_take_a_batch_of_any_size_in_steps(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """The old default refused 5,001 rows; a stepwise commit takes 12,001 (13 steps)."""
    settings = sink(redis_server, tmp_path)
    big = _stage(settings, monkeypatch, "0", [range(0, 2000), range(2000, 12001)])
    RedisStreamWriter(settings, SCHEMA, None).commit(big, 0)
    published = [int(f[b"order_id"]) for _, f in redis_client.xrange("out")]
    assert sorted(published) == list(range(12001))
    assert committed_batch(redis_client, settings.identity) == 0
    assert staging_left(redis_client) == []
    # The same rows under an atomic commit with no limit: one script, no refusal.
    atomic = sink(redis_server, tmp_path, atomicCommit="true")
    again = _stage(atomic, monkeypatch, "1", [range(0, 2000), range(2000, 12001)])
    RedisStreamWriter(atomic, SCHEMA, None).commit(again, 1)
    assert redis_client.xlen("out") == 24002


def burst(client: redis.Redis) -> list[str]:
    """30 entries in one millisecond, then 10 spread over the next four seconds: cut by
    time (at 3300 ms), two partitions hold 34 and 6."""
    ids = [f"1000-{seq}" for seq in range(30)] + [f"{2000 + 400 * i}-0" for i in range(10)]
    pipe = client.pipeline()
    for n, entry in enumerate(ids):
        pipe.xadd("orders", {"n": n}, id=entry)
    pipe.execute()
    return ids


@requires_spark(4, 2, "read limits of Python stream readers")
def test_a_bounded_batch_is_cut_into_equal_shares_and_replays_them(
    redis_server: Any, redis_client: redis.Redis
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    ids = burst(redis_client)
    options = {"url": redis_server.url, "stream": "orders", "partitionsPerStream": "2"}
    reader = RedisStreamReader(StreamSettings.of(options), ID_ONLY)
    start = {"orders": "0-0"}
    unbounded = reader.latestOffset(start, ReadAllAvailable())
    assert CUTS_KEY not in unbounded
    assert [len(p) for p in read_all(reader, start, unbounded)] == [34, 6]  # by time

    end = reader.latestOffset(start, ReadMaxRows(40))
    assert end[CUTS_KEY] == {"orders": [ids[19]]}
    first = read_all(reader, start, end)
    assert first == [ids[:20], ids[20:]]
    redis_client.xadd("orders", {"n": 99}, id="9000-0")  # later entries change no replay
    assert read_all(reader, start, end) == first
    reader.stop()


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


@pytest.mark.spark
@requires_spark(4, 2, "maxEntriesPerTrigger rides on read limits")
def test_the_default_pipeline_runs_a_backlog_in_one_batch_of_bounded_steps(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """20,000 entries waiting, every option at its default: one micro-batch (the old
    default cut four of 5,000), published in steps, every entry once."""
    rows = 20_000
    for start in range(0, rows, 5000):
        pipe = redis_client.pipeline(transaction=False)
        for n in range(start, start + 5000):
            pipe.xadd("orders", {"n": n})
        pipe.execute()
    query = (
        spark_sources.readStream.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "orders")
        .schema("n long")
        .load()
        .writeStream.format("redis")
        .option("url", redis_server.url)
        .option("stream", "out")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [rows]
    published = sorted(int(fields[b"n"]) for _, fields in redis_client.xrange("out"))
    assert published == list(range(rows))


@pytest.mark.spark
def test_a_batch_write_works_on_the_defaults_and_atomic_refuses_past_its_limit(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    df = spark_sources.range(9000).withColumnRenamed("id", "order_id")
    writer = df.write.format("redis").option("url", redis_server.url).option("stream", "out")
    writer.mode("append").save()
    assert redis_client.xlen("out") == 9000 and staging_left(redis_client) == []
    atomic = writer.option("atomicCommit", "true").option("maxRowsPerCommit", "5000")
    with pytest.raises(Exception, match="maxRowsPerCommit") as refused:
        atomic.mode("append").save()
    assert "atomicCommit" in str(refused.value)
    assert redis_client.xlen("out") == 9000 and staging_left(redis_client) == []


@pytest.mark.spark
@pytest.mark.slow
def test_a_large_batch_write_works_on_the_defaults_in_bounded_steps(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    """200,000 rows (40 times the old refusal at 5,000) through ``df.write`` with no
    option: each row once, in 200 scripts of at most 1,000 operations (counted by Redis:
    ``INFO commandstats``). The 1M-row write is timed by benchmarks/sink_commit.py."""
    import time

    rows = 200_000
    redis_client.config_set("slowlog-log-slower-than", 1000)
    redis_client.slowlog_reset()
    df = spark_sources.range(rows).withColumnRenamed("id", "order_id")
    started = time.monotonic()
    (df.write.format("redis").option("url", redis_server.url).option("stream", "big")
     .mode("append").save())  # fmt: skip
    took = time.monotonic() - started
    steps = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert rows // STEP_ROWS <= steps <= rows // STEP_ROWS + 1  # +1: a NOSCRIPT retry
    longest = max((e["duration"] for e in redis_client.slowlog_get(100_000)), default=0)
    print(f"{rows:,}-row df.write on the defaults: {took:.1f} s, {steps} scripts, "
          f"longest command {longest / 1000:.1f} ms")  # fmt: skip
    redis_client.config_set("slowlog-log-slower-than", 10_000)
    assert redis_client.xlen("big") == rows
    seen = bytearray(rows)
    after = "-"
    while page := redis_client.xrange("big", after, "+", count=100_000):
        for _, fields in page:
            seen[int(fields[b"order_id"])] += 1
        after = "(" + page[-1][0].decode()
    assert seen.count(1) == rows
    assert staging_left(redis_client) == []
