"""lookup_join on a local Spark, against a real redis-server and aiohttp server."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest
import redis
from pyspark.sql import DataFrame, SparkSession, functions as F

from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from enrich import FixedDelayRetry, LookupCache, SchemaError
from enrich.spark import lookup_join, statistics
from tests.spark.sources import RowByRow, ShuffledLatencySource
from tests.support.http_server import BATCH_PATH, HttpTestServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

USERS = {
    "u1": {"name": "Ada", "tier": "gold", "credit": 10.5},
    "u2": {"name": "Bob", "tier": "silver", "credit": 3.0},
    "u3": {"name": "Cy", "tier": None, "credit": None},
}
MULTI = {"u9": [{"name": "Nine", "tier": "a", "credit": 1.0}, {"name": "Nein", "tier": "b"}]}


def store_users(client: redis.Redis) -> None:
    for key, doc in {**USERS, **MULTI}.items():
        client.set(f"user:{key}", json.dumps(doc))


def users(url: str, **settings: Any) -> RedisLookup:
    return RedisLookup(
        url,
        key_template="user:{}",
        value="json",
        schema="name string, tier string, credit double",
        **settings,
    )


def orders(spark: SparkSession, partitions: int = 6) -> tuple[DataFrame, pd.DataFrame]:
    """Orders with duplicates, misses, null keys, a 1:N key, and empty partitions."""
    keys = ["u1", "u2", "u1", None, "nobody", "u3", "u9", "u2", None, "u1", "zz", "u9"]
    data = [(i, k, float(i) * 1.5) for i, k in enumerate(keys)]
    df = spark.createDataFrame(data, "order_id bigint, user_id string, amount double")
    # More partitions than rows in some ranges: a few partitions are empty.
    df = df.repartitionByRange(partitions, "order_id").where("order_id < 3 OR order_id > 7")
    return df, pd.DataFrame(data, columns=["order_id", "user_id", "amount"]).query(
        "order_id < 3 or order_id > 7"
    )


def reference(left: pd.DataFrame, how: str) -> list[tuple[Any, ...]]:
    dims = [
        (key, doc.get("name"), doc.get("tier"), doc.get("credit"))
        for key, docs in {**USERS, **MULTI}.items()
        for doc in (docs if isinstance(docs, list) else [docs])
    ]
    right = pd.DataFrame(dims, columns=["user_id", "name", "tier", "credit"])
    merged = left.merge(right, on="user_id", how=how)
    return sorted_rows(merged.astype(object).where(merged.notna(), None).itertuples(index=False))


def sorted_rows(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.mark.parametrize("how", ["left", "inner"])
def test_matches_a_pandas_reference(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis, how: str
) -> None:
    store_users(redis_client)
    df, expected_input = orders(spark)
    out = lookup_join(df, users(redis_server.url), on="user_id", how=how, capacity=8)
    assert out.columns == ["order_id", "user_id", "amount", "name", "tier", "credit"]
    assert [f.dataType.simpleString() for f in out.schema.fields[3:]] == [
        "string",
        "string",
        "double",
    ]
    assert sorted_rows(out.collect()) == reference(expected_input, how)


@pytest.mark.parametrize("how", ["left", "inner"])
def test_the_http_batch_endpoint_gives_the_rows_of_the_per_row_join(
    spark: SparkSession, http_server: HttpTestServer, how: str
) -> None:
    http_server.data.update({**USERS, **MULTI, "bad": {"name": "Bad", "credit": "lots"}})
    source = HttpLookup(
        http_server.url("/users/{}"),
        schema="name string, tier string, credit double",
        batch_url=http_server.url(BATCH_PATH),
        max_batch=2,
    )
    df, expected_input = orders(spark)
    extra = spark.createDataFrame([(20, "bad", 1.0), (21, "u2", 2.0)], df.schema)
    settings: dict[str, Any] = {"on": "user_id", "how": how, "on_error": "error_column"}
    columnar = lookup_join(df.union(extra), source, name=f"http_columnar_{how}", **settings)
    per_row = lookup_join(df.union(extra), RowByRow(source), name=f"http_per_row_{how}", **settings)
    got = sorted_rows(columnar.collect())
    assert got == sorted_rows(per_row.collect())
    assert [row[:6] for row in got if row[0] < 20] == reference(expected_input, how)
    (bad,) = [row for row in got if row[1] == "bad"]
    assert bad[3:] == (None, None, None, "decode: field 'credit': cannot read 'lots' as double")
    assert statistics(f"http_columnar_{how}").rows_in == 9
    assert statistics(f"http_per_row_{how}").rows_in == 9


def test_ordered_mode_keeps_each_partitions_order(spark: SparkSession) -> None:
    df = spark.range(0, 400, numPartitions=2).withColumn("k", F.col("id").cast("string"))
    out = lookup_join(df, ShuffledLatencySource(), on="k", mode="ordered", capacity=32, max_batch=1)
    got = out.withColumn("p", F.spark_partition_id()).collect()
    for part in (0, 1):
        ids = [r.id for r in got if r.p == part]
        assert ids == sorted(ids) and ids
    assert all(r.echo == r.k for r in got)
    unordered = lookup_join(df, ShuffledLatencySource(), on="k", mode="unordered", max_batch=1)
    assert sorted(r.id for r in unordered.collect()) == list(range(400))


def test_chained_joins_redis_then_http(
    spark: SparkSession,
    redis_server: Any,
    redis_client: redis.Redis,
    http_server: HttpTestServer,
) -> None:
    store_users(redis_client)
    for tier, label in {"gold": "Gold tier", "silver": "Silver tier"}.items():
        http_server.data[tier] = {"label": label, "discount": 0.1}
    tiers = HttpLookup(http_server.url("/tiers/{}"), schema="label string, discount double")
    df = spark.createDataFrame(
        [(1, "u1"), (2, "u2"), (3, "u3"), (4, "zz")], "id int, user_id string"
    )
    once = lookup_join(df, users(redis_server.url), on="user_id", name="chain_users")
    twice = lookup_join(once, tiers, on="tier", prefix="tier_", name="chain_tiers")
    got = {r.id: (r.name, r.tier_label) for r in twice.collect()}
    assert got == {
        1: ("Ada", "Gold tier"),
        2: ("Bob", "Silver tier"),
        3: ("Cy", None),
        4: (None, None),
    }
    assert statistics("chain_users").rows_in == 4
    assert statistics("chain_tiers").requests >= 1 and statistics("chain_tiers").misses == 0


def test_composite_keys(spark: SparkSession, redis_server: Any, redis_client: redis.Redis) -> None:
    redis_client.set("order:eu:7", json.dumps({"status": "paid"}))
    source = RedisLookup(
        redis_server.url, key_template="order:{}:{}", value="json", schema="status string"
    )
    df = spark.createDataFrame([("eu", 7), ("eu", 8), (None, 7)], "region string, no int")
    got = lookup_join(df, source, on=["region", "no"]).collect()
    assert [(r.region, r.no, r.status) for r in got] == [
        ("eu", 7, "paid"),
        ("eu", 8, None),
        (None, 7, None),
    ]


def test_error_column_retry_and_cache(spark: SparkSession, http_server: HttpTestServer) -> None:
    http_server.data["ok"] = {"label": "fine"}
    http_server.fail("down", 503)
    source = HttpLookup(http_server.url("/t/{}"), schema="label string")
    df = spark.createDataFrame([("ok",), ("down",), ("ok",), ("none",)], "k string").coalesce(1)
    out = lookup_join(
        df,
        source,
        on="k",
        on_error="error_column",
        error_column="why",
        retry=FixedDelayRetry(max_attempts=2, delay=0.01),
        cache=LookupCache(max_rows=10),
        name="errors",
    )
    got = [(r.k, r.label, r.why) for r in out.collect()]
    assert got[0] == ("ok", "fine", None) and got[2] == ("ok", "fine", None)
    assert got[1][1] is None and got[1][2].startswith("status:503")
    assert got[3] == ("none", None, None)
    metrics = statistics("errors")
    assert metrics.errors["status:503"] == 1 and metrics.retries >= 1


def test_missing_key_column_names_it_and_lists_the_columns(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, "a")], "id int, user string")
    with pytest.raises(ValueError, match=r"no column 'user_id'.*available columns: id, user"):
        lookup_join(df, ShuffledLatencySource(), on="user_id")


def test_colliding_names_are_named(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, "a", "x")], "id int, k string, Echo string")
    with pytest.raises(ValueError, match=r"\['echo'\].*prefix="):
        lookup_join(df, ShuffledLatencySource(), on="k")
    with pytest.raises(ValueError, match=r"\['id'\]"):
        lookup_join(
            df,
            ShuffledLatencySource(),
            on="k",
            prefix="d_",
            on_error="error_column",
            error_column="id",
        )
    lookup_join(df, ShuffledLatencySource(), on="k", prefix="d_")  # fine with a prefix


def test_bad_settings_fail_on_the_driver(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1,)], "k int")
    for bad, match in [
        ({"how": "outer"}, "how must be"),
        ({"mode": "sideways"}, "mode must be"),
        ({"capacity": 0}, "capacity"),
        ({"on_error": "ignore"}, "on_error must be"),
        ({"max_batch": 0}, "max_batch"),
    ]:
        with pytest.raises(ValueError, match=match):
            lookup_join(df, ShuffledLatencySource(), on="k", **bad)
    with pytest.raises(SchemaError, match="name string tier"):
        RedisLookup(
            "redis://127.0.0.1:1", key_template="u:{}", value="json", schema="name string tier"
        )


def test_an_unreachable_source_names_the_host_but_not_the_password(spark: SparkSession) -> None:
    source = RedisLookup(
        "redis://reader:S3CRET-pw@127.0.0.1:1/0",
        key_template="user:{}",
        value="json",
        schema="name string",
        timeout=2.0,
    )
    df = spark.createDataFrame([("u1",)], "user_id string")
    with pytest.raises(Exception, match=r"127\.0\.0\.1:1\b") as failure:
        lookup_join(df, source, on="user_id", timeout=5.0).collect()
    assert "S3CRET" not in str(failure.value)


@pytest.mark.parametrize("action", ["show", "limit"])
def test_show_and_limit_keep_the_joins_metrics(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis, action: str
) -> None:
    """Spark never reads the accumulator update of a task whose output it stopped
    reading: the join's numbers reach the driver through its inbox instead, and a task
    read to its end still counts once."""
    store_users(redis_client)
    df = spark.range(0, 3_000, numPartitions=2).selectExpr("id % 4 AS user_id")
    name = f"join_stopped_{action}"
    joined = lookup_join(df, users(redis_server.url), on="user_id", how="left", name=name)
    if action == "show":
        joined.show(2)
    else:
        assert len(joined.limit(3).collect()) == 3
    assert statistics(name).rows_in >= 3
    whole = lookup_join(df, users(redis_server.url), on="user_id", how="left", name=f"{name}_all")
    assert whole.count() == 3_000
    assert statistics(f"{name}_all").rows_in == 3_000
