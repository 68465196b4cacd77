"""Through Spark Connect (a local server, tests.support.connect_server): lookup_join, the
SQL function, the Redis data sources, and the join's metrics per micro-batch, which there
come only from the progress's observed metrics (Connect has no accumulators)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from enrich.spark import EnrichMetricsListener, lookup_join, register_data_sources
from enrich.spark.sql.lookup_udf import register_lookup
from enrich.testing import FakeSource
from tests.spark.conftest import spark_env
from tests.spark.metrics.test_observed_metrics import check_progress, event_files, events, source
from tests.support.connect_server import connect_server
from tests.support.spark_version import requires_spark

pytestmark = [
    pytest.mark.spark,
    pytest.mark.connect,
    pytest.mark.timeout(300),
    requires_spark(4, 0, "Python data sources and client-side listeners under Spark Connect"),
]
pytest.importorskip("grpc", reason="Spark Connect needs the connect extra (in dev)")

# pyspark may switch the whole process to Spark Connect when a remote session starts.
_MODE = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@pytest.fixture(scope="module")
def connect() -> Iterator[SparkSession]:
    """A Spark Connect session on a local server of its own (start-up ~15-60 s)."""
    # Connect's own builder: pyspark's SparkSession.builder refuses a remote session
    # beside the classic one the other Spark tests share (SESSION_ALREADY_EXIST).
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    saved = {name: os.environ.get(name) for name in _MODE}
    with connect_server(spark_env()) as url:
        session = RemoteSession.builder.remote(url).getOrCreate()
        try:
            yield session
        finally:
            session.stop()
            for name, value in saved.items():  # the classic tests after these
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def test_lookup_join_and_the_sql_function(connect: SparkSession) -> None:
    assert type(connect).__module__.startswith("pyspark.sql.connect")
    df = connect.createDataFrame([(1, "u1"), (2, "zz"), (3, None)], "id int, user_id string")
    users = FakeSource({"u1": ("Ada",)})
    joined = lookup_join(df, users, on="user_id", how="left", name="connect_batch")
    assert sorted(tuple(r) for r in joined.collect()) == [
        (1, "u1", "Ada"),
        (2, "zz", None),
        (3, None, None),
    ]
    register_lookup(connect, "connect_dim", users)
    got = connect.sql(
        "SELECT k, connect_dim(k) AS d FROM VALUES ('u1'), ('zz') AS t(k) ORDER BY k"
    ).collect()
    assert got[0].d.value == "Ada" and got[1].d is None


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_streaming_joins_metrics_reach_progress_and_listener(
    connect: SparkSession, tmp_path: Path
) -> None:
    lines = Lines()
    logger = logging.getLogger("tests.spark.connect")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    listener = EnrichMetricsListener(logger)
    connect.streams.addListener(listener)
    try:
        joined = lookup_join(
            events(connect, event_files(tmp_path, 2)),
            source(),
            on="user_id",
            on_error="null",
            name="connect_users",
        )
        query = (
            joined.writeStream.format("memory")
            .queryName("connect_users_out")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
        assert connect.sql("SELECT * FROM connect_users_out").count() == 8
        check_progress(query, "connect_users", 2)
        # Client-side listener events arrive asynchronously: no event to wait on.
        deadline = time.monotonic() + 60
        while listener.batches < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        last = listener.last_batch("connect_users")
        assert last is not None and (last.rows_in, last.misses) == (4, 1), lines.lines
        assert any("connect_users: rows 4->4" in line for line in lines.lines), lines.lines
    finally:
        connect.streams.removeListener(listener)
        logger.removeHandler(lines)


def test_the_redis_data_sources(
    connect: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    register_data_sources(connect)
    for i in range(6):
        redis_client.xadd("connect_orders", {"order_id": i, "user_id": f"u{i % 2}"})
    redis_client.set("user:u1", json.dumps({"name": "Ada"}))
    from connectors.redis import RedisLookup

    users = RedisLookup(
        redis_server.url, key_template="user:{}", value="json", schema="name string"
    )
    orders = (
        connect.readStream.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "connect_orders")
        .schema("stream_id string, order_id long, user_id string")
        .load()
    )
    joined = lookup_join(orders, users, on="user_id", name="connect_redis")
    query = (
        joined.writeStream.format("redis")
        .option("url", redis_server.url)
        .option("stream", "connect_out")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    out = [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in redis_client.xrange("connect_out", "-", "+")
    ]
    assert sorted((int(e["order_id"]), e.get("name")) for e in out) == [
        (0, None),
        (1, "Ada"),
        (2, None),
        (3, "Ada"),
        (4, None),
        (5, "Ada"),
    ]


def test_an_async_maps_metrics_reach_the_progress_and_its_sql_function_runs(
    connect: SparkSession, tmp_path: Path
) -> None:
    from enrich.spark import async_map, observed_statistics
    from enrich.spark.sql import register_async_udf
    from tests.spark.functions import Echo
    from tests.spark.metrics.test_observed_metrics import field

    folder = tmp_path / "in"
    folder.mkdir()
    for batch in range(2):
        rows = [{"id": batch * 10 + i, "amount": 0.5} for i in range(3)]
        (folder / f"{batch}.json").write_text("\n".join(json.dumps(r) for r in rows))
    stream = (
        connect.readStream.schema("id long, amount double")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
    )
    mapped = async_map(stream, Echo(), "seen string, total double", name="connect_map")
    assert mapped.columns == ["id", "amount", "seen", "total"]  # no metrics column shows
    query = (
        mapped.writeStream.format("memory")
        .queryName("connect_map_out")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert connect.sql("SELECT * FROM connect_map_out").count() == 6
    progress = [p for p in query.recentProgress if int(field(p, "numInputRows")) > 0]
    assert len(progress) == 2
    for p in progress:
        got = observed_statistics(p)["connect_map"]
        assert (got.rows_in, got.rows_out, got.requests) == (3, 3, 3)
    register_async_udf(connect, "connect_echo", Echo(), "seen string, total double")
    got = connect.sql(
        "SELECT connect_echo(struct(id, amount)) AS e FROM VALUES (1, 2.0) AS t(id, amount)"
    )
    assert got.collect()[0].e.total == 3.0
