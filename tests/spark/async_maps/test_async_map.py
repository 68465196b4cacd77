"""``async_map`` on a real local Spark against a real aiohttp service: Flink's async I/O
semantics per row (order, capacity, timeout with retries, error policies, one output per
row, replays), the function's life per process, batches, the store protections and the
metrics. Bounds are read from what the service counted, never from a client's clock."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pyspark.sql import DataFrame, SparkSession

from enrich import ExponentialBackoffRetry, FixedDelayRetry, retry_on_empty
from enrich.protect import JobRateLimit
from enrich.spark import async_map, observed_statistics, statistics
from tests.spark.functions import Closing, Fetch, FetchMany, HoldFirst, Late, Lookup
from tests.spark.metrics.test_observed_metrics import field
from tests.support.http_server import HttpTestServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def keys_df(spark: SparkSession, keys: list[str], partitions: int = 1) -> DataFrame:
    rows = [(i, key) for i, key in enumerate(keys)]
    return spark.createDataFrame(rows, "n int, key string").repartition(partitions)


def url(server: HttpTestServer) -> str:
    return f"http://127.0.0.1:{server.port}/users"


def requests_for(server: HttpTestServer, key: str) -> int:
    return sum(1 for r in server.requests if r.key == key)


def test_rows_gain_the_fields_their_call_returned(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    http_server.data.update({"u1": {"name": "Ada", "age": 36}, "u2": {"name": "Bob"}})
    df = keys_df(spark, ["u1", "u2", "nobody"], partitions=2)
    out = async_map(df, Lookup(url(http_server)), "name string, age int", name="map_lookup")
    assert out.columns == ["n", "key", "name", "age"]
    rows = sorted(tuple(r) for r in out.collect())
    # A 404 gives the AsyncFunction's empty list: the row is dropped (Flink's complete([])).
    assert rows == [(0, "u1", "Ada", 36), (1, "u2", "Bob", None)]
    got = statistics("map_lookup")
    assert (got.rows_in, got.rows_out, got.misses, got.requests) == (3, 2, 1, 3)
    assert got.latency_p50 is not None and got.peak_in_flight >= 1


def test_ordered_keeps_each_partitions_order_and_unordered_does_not_wait(
    spark: SparkSession,
) -> None:
    keys = [f"k{i}" for i in range(12)]
    df = keys_df(spark, keys)
    # k0's call ends only after the 11 others: ORDERED still gives input order; UNORDERED
    # lets the 11 leave first.
    ordered = async_map(df, HoldFirst(uuid.uuid4().hex, "k0", 11), "seen string")
    assert [r.key for r in ordered.collect()] == keys
    unordered = async_map(
        df, HoldFirst(uuid.uuid4().hex, "k0", 11), "seen string", mode="unordered"
    )
    got = [r.key for r in unordered.collect()]
    assert sorted(got) == sorted(keys) and got[-1] == "k0"


def test_capacity_bounds_the_calls_in_flight_of_a_task(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    keys = [f"c{i}" for i in range(24)]
    http_server.data.update({key: {"name": key} for key in keys})
    http_server.set_default_latency(0.5)
    df = keys_df(spark, keys)
    assert async_map(df, Fetch(url(http_server)), "name string", capacity=6).count() == 24
    assert 1 <= http_server.max_in_flight <= 6
    http_server.reset()
    http_server.data.update({key: {"name": key} for key in keys})
    http_server.set_default_latency(0.5)
    assert async_map(df, Fetch(url(http_server)), "name string", capacity=24).count() == 24
    assert 6 < http_server.max_in_flight <= 24  # the bound above was the capacity's


def test_the_timeout_counts_every_retry_and_a_hook_may_answer_instead(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    http_server.data["up"] = {"name": "Up"}
    http_server.fail("down", 503)
    http_server.latency["down"] = 0.3
    df = keys_df(spark, ["up", "down"])
    out = async_map(
        df,
        Fetch(url(http_server)),
        "name string",
        timeout=1.0,
        retry=FixedDelayRetry(1000, 0.0),  # each retry at once: one is in flight at 1 s
        on_error="error_column",
    )
    rows = {r.key: r for r in out.collect()}
    assert rows["up"].name == "Up" and rows["up"].enrich_error is None
    # 1,000 attempts were allowed: the row's one timeout, not the attempts, ended it.
    assert rows["down"].enrich_error.startswith("timeout: ")
    assert 1 <= requests_for(http_server, "down") < 1000
    late = async_map(keys_df(spark, ["x"]), Late(), "name string", timeout=0.5)
    assert [r.name for r in late.collect()] == ["fallback-x"]


def test_retries_follow_their_predicates(spark: SparkSession, http_server: HttpTestServer) -> None:
    http_server.data.update({"flaky": {"name": "F"}, "busy": {"name": "B"}, "broken": {}})
    http_server.fail("flaky", 404, times=1)  # a miss first: retried on the result
    http_server.fail("busy", 503, times=2)  # retried on the exception
    http_server.fail("broken", 500)  # not retried: the predicate says no

    def overloaded(error: BaseException) -> bool:
        return isinstance(error, aiohttp.ClientResponseError) and error.status == 503

    df = keys_df(spark, ["flaky", "busy", "broken"])
    on_result = async_map(
        df.where("key = 'flaky'"),
        Fetch(url(http_server)),
        "name string",
        retry=FixedDelayRetry(3, 0.01, retry_on_result=retry_on_empty),
    )
    assert [r.name for r in on_result.collect()] == ["F"]
    on_error = async_map(
        df.where("key != 'flaky'"),
        Fetch(url(http_server)),
        "name string",
        retry=ExponentialBackoffRetry(5, 0.01, 0.1, retry_on_exception=overloaded),
        on_error="error_column",
    )
    rows = {r.key: r for r in on_error.collect()}
    assert rows["busy"].name == "B" and rows["broken"].enrich_error.startswith(
        "ClientResponseError: 500"
    )
    counts = {k: requests_for(http_server, k) for k in ("flaky", "busy", "broken")}
    assert counts == {"flaky": 2, "busy": 3, "broken": 1}


def test_error_policies_account_for_every_row(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    http_server.data.update({"ok": {"name": "Ok"}, "odd": {"name": "Odd", "age": "old"}})
    http_server.fail("bad", 500)
    df = keys_df(spark, ["ok", "bad", "odd"], partitions=2)

    def run(policy: str) -> dict[str, tuple[Any, ...]]:
        out = async_map(df, Fetch(url(http_server)), "name string, age int", on_error=policy)
        return {r.key: tuple(r)[2:] for r in out.collect()}

    assert run("null") == {"ok": ("Ok", None), "bad": (None, None), "odd": (None, None)}
    assert run("drop") == {"ok": ("Ok", None)}
    with_reason = run("error_column")
    assert with_reason["ok"] == ("Ok", None, None)
    assert with_reason["bad"][2].startswith("ClientResponseError: 500")
    assert with_reason["odd"][2] == "decode: field 'age': cannot read 'old' as int"
    strict = async_map(df.where("key != 'odd'"), Fetch(url(http_server)), "name string")
    with pytest.raises(Exception, match="500"):  # the one failing row fails the job
        strict.collect()


def test_a_replayed_micro_batch_calls_again(
    spark: SparkSession, http_server: HttpTestServer, tmp_path: Path
) -> None:
    http_server.data.update({"r1": {"name": "One"}, "r2": {"name": "Two"}})
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text('{"key": "r1"}\n{"key": "r2"}\n')
    stream = spark.readStream.schema("key string").json(str(folder))
    mapped = async_map(stream, Fetch(url(http_server)), "name string")
    seen: list[tuple[str, str]] = []

    def crash(batch: DataFrame, batch_id: int) -> None:
        batch.collect()
        raise RuntimeError("the sink failed after the map ran")

    def keep(batch: DataFrame, batch_id: int) -> None:
        seen.extend((r.key, r.name) for r in batch.collect())

    for sink, fails in ((crash, True), (keep, False)):
        query = (
            mapped.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        if fails:
            with pytest.raises(Exception, match="the sink failed"):
                query.awaitTermination(120)
        else:
            query.awaitTermination(120)
            assert query.exception() is None
    assert sorted(seen) == [("r1", "One"), ("r2", "Two")]
    # The replayed batch called the service again: nothing in flight was checkpointed.
    assert (requests_for(http_server, "r1"), requests_for(http_server, "r2")) == (2, 2)


def test_an_async_function_opens_once_per_task(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    """Spark gives a worker process no hook at its end, so a function lives one task:
    opened when the task's run starts, closed when it ends (reused workers included)."""
    http_server.data.update({f"p{i}": {"name": f"P{i}"} for i in range(8)})
    df = keys_df(spark, [f"p{i}" for i in range(8)], partitions=2)
    mapped = async_map(df, Lookup(url(http_server)), "name string")
    for _ in range(3):  # three jobs of two tasks each, on reused workers
        assert mapped.count() == 8
    opens = [r.key for r in http_server.requests if (r.key or "").startswith("open-")]
    assert len(opens) == 6


@pytest.mark.parametrize("action", ["show", "limit"])
def test_show_and_limit_keep_the_metrics_of_tasks_spark_stopped_reading(
    spark: SparkSession, tmp_path: Path, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark kills a worker whose output it stops reading (no accumulator update then):
    the rows it mapped still count, by the snapshot it sent before its first batch."""
    name = f"stopped_{action}"
    df = spark.range(0, 20_000, numPartitions=2).selectExpr("id AS n")
    mapped = async_map(df, Closing(str(tmp_path)), "twice bigint", name=name)
    if action == "show":
        mapped.show(3)
        assert "only showing top 3 rows" in capsys.readouterr().out
    else:
        assert len(mapped.limit(5).collect()) == 5
    metrics = statistics(name)
    assert metrics.rows_in >= 5 and metrics.rows_out >= 5, metrics
    # A run read to its end counts once: its snapshot gives way to its update.
    total = async_map(df, Closing(str(tmp_path)), "twice bigint", name=f"{name}_all")
    assert total.count() == 20_000
    assert statistics(f"{name}_all").rows_in == 20_000


def test_close_runs_in_the_workers_after_each_task(spark: SparkSession, tmp_path: Path) -> None:
    """A function's close() (a session closed, a buffered writer flushed) runs in Spark's
    workers: the file each close() appends to exists after the query, with every call
    counted."""
    df = spark.range(0, 400, numPartitions=4).selectExpr("id AS n")
    mapped = async_map(df, Closing(str(tmp_path)), "twice bigint", name="closing")
    assert mapped.count() == 400
    closed = [int(line) for f in tmp_path.glob("closed-*") for line in f.read_text().split()]
    assert sorted(closed) == [100, 100, 100, 100]  # each task's function, closed once


def test_a_batch_function_gets_lists_of_batch_size_rows(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    http_server.data.update({f"b{i}": {"name": f"B{i}"} for i in range(9)})
    df = keys_df(spark, [f"b{i}" for i in range(10)])  # b9 is unknown: None, null fields
    out = async_map(
        df, FetchMany(f"http://127.0.0.1:{http_server.port}"), "name string", batch_size=4
    )
    rows = {r.key: r.name for r in out.collect()}
    assert rows == {**{f"b{i}": f"B{i}" for i in range(9)}, "b9": None}
    sizes = [len(json.loads(r.body)) for r in http_server.requests if r.method == "POST"]
    assert sorted(sizes) == [2, 4, 4]  # the three batches are in flight at once: any order


def test_a_row_waiting_for_a_rate_limit_permit_does_not_time_out(
    spark: SparkSession, http_server: HttpTestServer, redis_server: Any
) -> None:
    keys = [f"q{i}" for i in range(30)]
    http_server.data.update({key: {"name": key} for key in keys})
    limit = JobRateLimit(rate=20, redis_url=redis_server.url, key=f"test:{uuid.uuid4().hex}")
    out = async_map(
        keys_df(spark, keys, partitions=2),
        Fetch(url(http_server)),
        "name string",
        timeout=0.5,  # far less than the 1.4 s or more the rate spreads the calls over
        job_rate_limit=limit,
        on_error="error_column",
    )
    rows = out.collect()
    assert len(rows) == 30 and all(r.enrich_error is None for r in rows)
    arrivals = sorted(r.started for r in http_server.requests)
    assert arrivals[-1] - arrivals[0] >= (30 - 2) / 20 * 0.9  # paced (a burst of 0.1 s)


def test_concurrency_bounds_the_calls_of_a_process(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    keys = [f"s{i}" for i in range(12)]
    http_server.data.update({key: {"name": key} for key in keys})
    http_server.set_default_latency(0.3)
    df = keys_df(spark, keys)
    fixed = async_map(df, Fetch(url(http_server)), "name string", concurrency=3, name="map_c3")
    assert fixed.count() == 12
    assert 1 <= http_server.max_in_flight <= 3
    assert statistics("map_c3").peak_in_flight > 3  # rows waited for a slot, in the task
    auto = async_map(
        df, Fetch(url(http_server)), "name string", concurrency="auto", name="map_auto"
    )
    assert auto.count() == 12
    assert statistics("map_auto").concurrency_limit >= 1


def test_each_micro_batch_progress_carries_the_maps_metrics(
    spark: SparkSession, http_server: HttpTestServer, tmp_path: Path
) -> None:
    http_server.data["m1"] = {"name": "M"}
    http_server.fail("m2", 500)
    folder = tmp_path / "in"
    folder.mkdir()
    for batch in range(2):
        (folder / f"{batch}.json").write_text('{"key": "m1"}\n{"key": "m2"}\n{"key": "m3"}\n')
    stream = spark.readStream.schema("key string").option("maxFilesPerTrigger", 1).json(str(folder))
    mapped = async_map(
        stream,
        Fetch(url(http_server)),
        "name string",
        on_error="null",
        name="map_observed",
        observe=True,
    )
    assert mapped.columns == ["key", "name"]
    query = (
        mapped.writeStream.format("memory")
        .queryName("map_observed_out")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert spark.sql("SELECT * FROM map_observed_out").count() == 6
    progress = [p for p in query.recentProgress if int(field(p, "numInputRows")) > 0]
    assert len(progress) == 2
    for p in progress:
        got = observed_statistics(p)["map_observed"]
        assert (got.rows_in, got.rows_out, got.requests) == (3, 3, 3)
        assert dict(got.errors) == {"ClientResponseError": 1} and got.peak_in_flight >= 1


def test_bad_arguments_are_named_before_any_job(spark: SparkSession) -> None:
    df = keys_df(spark, ["a"])

    def not_async(row: dict[str, Any]) -> dict[str, Any]:
        return row

    with pytest.raises(ValueError, match=r"fn must be an async function .* make it async def"):
        async_map(df, not_async, "name string")
    with pytest.raises(ValueError, match=r"columns \['key'\] would be added"):
        async_map(df, Fetch("http://x"), "key string")
    with pytest.raises(ValueError, match="capacity must be an int >= 1, got 0"):
        async_map(df, Fetch("http://x"), "name string", capacity=0)
