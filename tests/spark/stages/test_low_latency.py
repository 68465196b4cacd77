"""The low-latency profile (``enrich.spark.low_latency``): async progress tracking into
the redis sink keyed by each row's source entry, refused where it would break exactly
once; a query re-cut on a restart (Spark's logs behind the sink, as async progress
tracking leaves them) neither loses nor doubles a row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from enrich.spark import low_latency, register_data_sources
from enrich.spark.queries.latency import ProfileRefused, streaming_sources
from enrich.spark.sink.redis.row_writes import SinkSettings
from enrich.spark.sink.redis.two_phase import published_marks
from tests.support.spark_version import requires_spark

pytestmark = [
    pytest.mark.spark,
    pytest.mark.timeout(240),
    requires_spark(4, 2, "read limits of Python sources and async progress tracking"),
]

SCHEMA = "stream_id string, order_id long"


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


def orders(spark: SparkSession, url: str, streams: str = "orders", **options: Any) -> Any:
    reader = spark.readStream.format("redis-stream").option("url", url).option("stream", streams)
    return reader.options(**options).schema(SCHEMA).load()


def test_the_profile_is_refused_where_it_would_break_exactly_once(
    spark_sources: SparkSession, redis_server: Any
) -> None:
    url = redis_server.url
    rate = spark_sources.readStream.format("rate").load()
    with pytest.raises(ProfileRefused, match=r"or one kafka source .found: rate"):
        low_latency(rate, warm=False)
    both = orders(spark_sources, url).unionByName(orders(spark_sources, url, "returns"))
    with pytest.raises(ProfileRefused, match="redis-stream, redis-stream"):
        low_latency(both, warm=False)
    with pytest.raises(ProfileRefused, match="no column 'stream_id'"):
        low_latency(orders(spark_sources, url).drop("stream_id"), warm=False)
    with pytest.raises(ProfileRefused, match=r"reads 2 streams .*stream_key"):
        low_latency(orders(spark_sources, url, "orders,returns"), warm=False)
    with pytest.raises(ProfileRefused, match="streaming queries"):
        low_latency(spark_sources.range(3), warm=False)
    assert streaming_sources(orders(spark_sources, url, "a,b")) == [("redis-stream", "a,b")]


def test_a_query_re_cut_on_restart_publishes_each_entry_once(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The first run publishes 300 entries in batches of 40. Then its offset and commit
    logs lose all but the first batch, as async progress tracking may leave them when
    the driver dies; the restart, with batches of 70, plans again from there: most of
    its rows were published, 100 are new."""
    url = redis_server.url
    for i in range(300):
        redis_client.xadd("orders", {"order_id": i})
    checkpoint = tmp_path / "ck"
    options = {"url": url, "stream": "out", "checkpointLocation": str(checkpoint)}
    identity = SinkSettings.of({**options, "sourceIdColumn": "stream_id"}).identity

    def run(limit: int) -> Any:
        df = orders(spark_sources, url, maxEntriesPerTrigger=limit)
        query = low_latency(df, warm=False).options(**options).start()
        query.processAllAvailable()
        query.stop()
        # Spark 4.3: under async progress tracking, a stopped query's clean-up commits the
        # Python source after its runner has closed; that fails (a broken pipe in the
        # log) before the query leaves the session's active queries, and a restart in
        # the same driver is then refused (CONCURRENT_QUERY). A crashed driver (the crash
        # harness) restarts in a new process; here the stale entry is dropped by hand.
        query.awaitTermination()
        spark_sources._jsparkSession.sharedState().activeStreamingQueries().remove(
            spark_sources._jvm.java.util.UUID.fromString(query.id)
        )
        return query

    first = run(40)
    assert [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]][:2] == [40, 40]
    for log in ("offsets", "commits"):
        for entry in (checkpoint / log).iterdir():  # a log file and its ".N.crc" checksum
            number = entry.name.removeprefix(".").removesuffix(".crc")
            if number.isdigit() and int(number) > 0:
                entry.unlink()
    for i in range(300, 400):
        redis_client.xadd("orders", {"order_id": i})
    second = run(70)
    replayed = sum(p["numInputRows"] for p in second.recentProgress)
    assert replayed == 360  # batch 0's end was entry 40: all after it came again
    ids = [int(f[b"order_id"]) for _, f in redis_client.xrange("out")]
    assert sorted(ids) == list(range(400))  # none lost, none twice
    last = redis_client.xrevrange("orders", count=1)[0][0].decode()
    assert published_marks(redis_client, identity) == {"*": last}


def _run_to_end(writer: Any, url: str, stream: str, checkpoint: Path) -> str:
    """Start ``writer`` into ``stream``, run it until its input is drained, stop it;
    returns the physical plan of its last micro-batch."""
    query = (
        writer.option("url", url)
        .option("stream", stream)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        query.processAllAvailable()
        return str(query._jsq.streamingQuery().lastExecution().executedPlan().toString())
    finally:
        query.stop()


@pytest.mark.parametrize(
    "chained", [False, True, "async_map"], ids=["one join", "two joins", "async_map, join"]
)
def test_the_sink_runs_the_joins_of_the_query_it_is_given(
    spark_sources: SparkSession,
    redis_server: Any,
    redis_client: redis.Redis,
    tmp_path: Path,
    chained: bool | str,
) -> None:
    """Under the profile a lookup_join's output is written by a sink that runs the join
    in its own worker: no mapInArrow stage is left in the plan, every row comes out
    joined once, and the join's metrics still reach the driver."""
    from connectors.redis import RedisLookup
    from enrich.spark import async_map, lookup_join, statistics
    from tests.spark.functions import Double

    url = redis_server.url
    for user in range(10):
        redis_client.hset(f"user:{user}", mapping={"name": f"n{user}"})
        redis_client.hset(f"tier:{user % 3}", mapping={"tier": f"t{user % 3}"})
    for i in range(120):
        redis_client.xadd("orders", {"order_id": i})
    users = RedisLookup(url, key_template="user:{}", value="hash", schema="name string")
    df = orders(spark_sources, url)
    if chained == "async_map":  # a call per row first, then the join: both in the sink
        df = async_map(df, Double(), "doubled long", name="doubling")
    df = lookup_join(df, users, on="order_id", name=f"users_{chained}")
    if chained is True:
        tiers = RedisLookup(url, key_template="tier:{}", value="hash", schema="tier string")
        df = lookup_join(df, tiers, on="order_id", name="tiers")
    plan = _run_to_end(low_latency(df, warm=False), url, "out", tmp_path / "ck")
    assert "MapInArrow" not in plan, plan
    rows = {int(f[b"order_id"]): f for _, f in redis_client.xrange("out")}
    assert sorted(rows) == list(range(120))
    assert rows[3][b"name"] == b"n3" and b"name" not in rows[11]
    if chained is True:
        assert rows[2][b"tier"] == b"t2" and b"tier" not in rows[3]
    if chained == "async_map":
        assert all(int(f[b"doubled"]) == 2 * i for i, f in rows.items())
        assert statistics("doubling").rows_in == 120
    assert statistics(f"users_{chained}").rows_in == 120


def test_without_the_join_in_the_sink_the_join_keeps_its_stage(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """``join_in_sink=False``, or a step after the join, leaves the join in its own
    ``mapInArrow`` stage (the reference the other test differs from)."""
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join

    url = redis_server.url
    for i in range(20):
        redis_client.xadd("orders", {"order_id": i})
    users = RedisLookup(url, key_template="user:{}", value="hash", schema="name string")
    joined = lookup_join(orders(spark_sources, url), users, on="order_id")
    for n, writer in enumerate(
        (
            low_latency(joined, warm=False, join_in_sink=False),
            low_latency(joined.select("*"), warm=False),
        )
    ):
        plan = _run_to_end(writer, url, f"out{n}", tmp_path / f"ck{n}")
        assert "MapInArrow" in plan, plan
        assert redis_client.xlen(f"out{n}") == 20
