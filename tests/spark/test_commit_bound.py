"""A transactional commit is bounded: the sink refuses a batch of more than
``maxRowsPerCommit`` rows (5,000 by default) and publishes none of it, and the
``redis-stream`` source bounds its micro-batches to the same 5,000 entries by default,
cut into equal shares by the ids it counted (``@cuts``), so the default pipeline runs
in commits that each stop Redis for a short while."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from enrich.spark import register_data_sources
from enrich.spark.redis_options import BATCH_ROWS
from enrich.spark.sink.commit import CommitTooLarge, committed_batch, index_key
from enrich.spark.sink.data_source import RedisStreamWriter
from enrich.spark.sink.rows import SinkSettings
from enrich.spark.streams.loss import CUTS_KEY
from enrich.spark.streams.source import RedisStreamReader, StreamSettings
from tests.spark.test_sink_commit import SCHEMA, _stage
from tests.spark.test_stream_partitions import ID_ONLY, read_all
from tests.support.spark_version import requires_spark

pytestmark = [pytest.mark.timeout(300)]


def sink(redis_server: Any, tmp_path: Path, **options: str) -> SinkSettings:
    base = {"url": redis_server.url, "stream": "out", "checkpointLocation": str(tmp_path)}
    return SinkSettings.of({**base, **options})


def staging_left(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter("enrich:sink:*:staging:*"))


def test_both_limits_default_to_one_bound_and_zero_lifts_them(redis_server: Any) -> None:
    url = redis_server.url
    assert BATCH_ROWS == 5_000
    assert SinkSettings.of({"url": url, "stream": "out"}).max_rows == BATCH_ROWS
    assert SinkSettings.of({"url": url, "stream": "out", "maxRowsPerCommit": "0"}).max_rows is None
    assert StreamSettings.of({"url": url, "stream": "s"}).max_entries == BATCH_ROWS
    lifted = StreamSettings.of({"url": url, "stream": "s", "maxEntriesPerTrigger": "0"})
    assert lifted.max_entries is None
    for bad in ("-1", "lots"):
        with pytest.raises(ValueError, match=f"option maxRowsPerCommit .* got '{bad}'"):
            SinkSettings.of({"url": url, "stream": "out", "maxRowsPerCommit": bad})
        with pytest.raises(ValueError, match=f"option maxEntriesPerTrigger .* got '{bad}'"):
            StreamSettings.of({"url": url, "stream": "s", "maxEntriesPerTrigger": bad})


def test_a_batch_over_the_limit_publishes_nothing_and_leaves_no_staging(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """Each task stays under the limit; their sum does not: the driver refuses it."""
    settings = sink(redis_server, tmp_path, maxRowsPerCommit="1000")
    messages = _stage(settings, monkeypatch, "3", [range(0, 700), range(700, 1300)])
    with pytest.raises(CommitTooLarge) as refused:
        RedisStreamWriter(settings, SCHEMA, None).commit(messages, 3)
    error = refused.value
    assert (error.batch, error.rows, error.limit) == ("3", 1300, 1000)
    text = str(error)
    assert "batch 3 holds 1,300 rows" in text and "maxRowsPerCommit (1,000)" in text
    assert "maxEntriesPerTrigger" in text and "maxOffsetsPerTrigger" in text
    assert redis_client.xlen("out") == 0
    assert committed_batch(redis_client, settings.identity) is None
    assert staging_left(redis_client) == []
    assert redis_client.scard(index_key(settings.identity)) == 0


def test_a_task_over_the_limit_stops_staging_at_once(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = sink(redis_server, tmp_path, maxRowsPerCommit="1200")
    with pytest.raises(CommitTooLarge, match="batch 5 holds 1,500 rows or more"):
        _stage(settings, monkeypatch, "5", [range(5000)])
    staged = staging_left(redis_client)
    assert len(staged) == 1 and redis_client.llen(staged[0]) <= 1200  # not the 5,000
    # Spark aborts the batch with no message from the failed task: its staging goes too.
    RedisStreamWriter(settings, SCHEMA, None).abort([None], 5)
    assert staging_left(redis_client) == [] and redis_client.xlen("out") == 0


def test_the_default_limit_takes_5000_rows_and_refuses_one_more(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = sink(redis_server, tmp_path)
    full = _stage(settings, monkeypatch, "0", [range(0, 2000), range(2000, 5000)])
    RedisStreamWriter(settings, SCHEMA, None).commit(full, 0)
    assert redis_client.xlen("out") == 5000
    over = _stage(settings, monkeypatch, "1", [range(0, 2000), range(2000, 5001)])
    with pytest.raises(CommitTooLarge, match="5,001 rows"):
        RedisStreamWriter(settings, SCHEMA, None).commit(over, 1)
    assert redis_client.xlen("out") == 5000
    assert committed_batch(redis_client, settings.identity) == 0
    assert staging_left(redis_client) == []  # the refused batch's staging is deleted
    lifted = sink(redis_server, tmp_path, maxRowsPerCommit="0")  # the replay, no limit
    again = _stage(lifted, monkeypatch, "1", [range(0, 2000), range(2000, 5001)])
    RedisStreamWriter(lifted, SCHEMA, None).commit(again, 1)
    assert redis_client.xlen("out") == 10001


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
@requires_spark(4, 2, "the default maxEntriesPerTrigger rides on read limits")
def test_the_default_pipeline_runs_a_backlog_in_bounded_commits(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """20,000 entries waiting, every option at its default: four micro-batches of at
    most 5,000, each committed, every entry published once."""
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
    assert sizes == [5000, 5000, 5000, 5000]
    published = sorted(int(fields[b"n"]) for _, fields in redis_client.xrange("out"))
    assert published == list(range(rows))


@pytest.mark.spark
def test_a_batch_write_over_the_limit_fails_and_names_the_way_out(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    df = spark_sources.range(9000).withColumnRenamed("id", "order_id")
    writer = df.write.format("redis").option("url", redis_server.url).option("stream", "out")
    with pytest.raises(Exception, match="maxRowsPerCommit") as refused:
        writer.mode("append").save()
    assert 'option("mode", "idempotent")' in str(refused.value)
    assert redis_client.xlen("out") == 0 and staging_left(redis_client) == []
    writer.option("maxRowsPerCommit", "0").mode("append").save()
    assert redis_client.xlen("out") == 9000
