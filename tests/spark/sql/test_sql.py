"""register_lookup: the SQL patterns of enrich.spark.sql's docstring, on a batch query."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from connectors.redis import RedisLookup
from enrich.spark import statistics
from enrich.spark.sql.lookup_udf import register_lookup
from enrich.testing import FakeSource
from tests.spark.sources import PidSource

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


@pytest.fixture
def orders(spark: SparkSession, redis_client: redis.Redis) -> None:
    redis_client.set("user:u1", json.dumps({"name": "Ada", "tier": "gold", "country": "uk"}))
    redis_client.set("user:u2", json.dumps({"name": "Bob", "tier": "silver", "country": "fr"}))
    redis_client.set("user:u9", json.dumps([{"name": "Nine"}, {"name": "Nein"}]))
    redis_client.set("country:uk", json.dumps({"label": "United Kingdom"}))
    spark.createDataFrame(
        [(1, "u1"), (2, "u2"), (3, "zz"), (4, None), (5, "u9"), (6, "u1")],
        "order_id int, user_id string",
    ).createOrReplaceTempView("orders")


def register_users(spark: SparkSession, url: str, name: str = "dim_user", **settings: Any) -> Any:
    source = RedisLookup(
        url,
        key_template="user:{}",
        value="json",
        schema="name string, tier string, country string",
    )
    return register_lookup(spark, name, source, **settings)


def test_left_inner_and_several_lookups(
    spark: SparkSession, redis_server: Any, orders: None
) -> None:
    register_users(spark, redis_server.url)
    countries = RedisLookup(
        redis_server.url, key_template="country:{}", value="json", schema="label string"
    )
    register_lookup(spark, "dim_country", countries, cache=None)
    left = spark.sql(
        "SELECT o.order_id, u.name, u.tier FROM "
        "(SELECT *, dim_user(user_id) AS u FROM orders) o ORDER BY order_id"
    ).collect()
    assert [(r.order_id, r.name) for r in left] == [
        (1, "Ada"),
        (2, "Bob"),
        (3, None),
        (4, None),
        (5, "Nine"),
        (6, "Ada"),  # 1:N: first row
    ]
    inner = spark.sql(
        "SELECT order_id FROM (SELECT *, dim_user(user_id) AS u FROM orders) o "
        "WHERE u IS NOT NULL ORDER BY order_id"
    ).collect()
    assert [r.order_id for r in inner] == [1, 2, 5, 6]
    chained = spark.sql(
        "SELECT x.order_id, x.u.name AS name, dim_country(x.u.country).label AS country "
        "FROM (SELECT *, dim_user(user_id) AS u FROM orders) x ORDER BY order_id"
    ).collect()
    assert [(r.order_id, r.country) for r in chained][:3] == [
        (1, "United Kingdom"),
        (2, None),
        (3, None),
    ]
    expanded = spark.sql(
        "SELECT o.order_id, o.u.* FROM (SELECT *, dim_user(user_id) AS u FROM orders) o "
        "WHERE order_id = 1"
    ).collect()
    assert [tuple(r) for r in expanded] == [(1, "Ada", "gold", "uk")]
    assert statistics("dim_user").rows_in >= 18


def test_composite_keys_and_dataframe_use(spark: SparkSession) -> None:
    udf = register_lookup(spark, "dim_pid", PidSource(), on_error="null")
    got = spark.sql("SELECT dim_pid('a', 1) AS d, dim_pid(CAST(NULL AS STRING), 2) AS n").first()
    assert got is not None and got.d.echo == "('a', 1)" and got.n is None
    df = spark.createDataFrame([("x",)], "k string")
    assert df.select(udf("k").alias("d")).first().d.echo == "x"  # type: ignore[union-attr]


def test_error_policies_in_sql(spark: SparkSession) -> None:
    broken = FakeSource({"a": ("A",), "bad": ValueError("broken")})
    register_lookup(spark, "dim_err", broken, on_error="error_column", error_column="why")
    rows = spark.sql(
        "SELECT k, dim_err(k) AS d FROM VALUES ('a'), ('bad'), ('x') AS t(k) ORDER BY k"
    ).collect()
    assert rows[0].d.value == "A"
    assert rows[1].d.why == "ValueError: broken" and rows[2].d is None
    with pytest.raises(ValueError, match="on_error must be one of"):
        register_lookup(spark, "dim_drop", broken, on_error="drop")
    with pytest.raises(ValueError, match="SQL identifier"):
        register_lookup(spark, "dim user", broken)
