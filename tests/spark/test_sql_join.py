"""The table-shaped SQL lookup join (an Arrow UDTF over TABLE(...)) on a local Spark,
against a real redis-server: the rows of lookup_join, inner and left, 1:N, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from connectors.redis import RedisLookup
from enrich.spark import lookup_join
from enrich.spark.sql.join_table import register_lookup_join

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SCHEMA = "name string, tier string"


def store_users(client: redis.Redis) -> None:
    client.set("su:u1", json.dumps({"name": "Ada", "tier": "gold"}))
    client.set("su:u2", json.dumps({"name": "Bob", "tier": None}))
    client.set("su:u9", json.dumps([{"name": "Nine", "tier": "a"}, {"name": "Nein"}]))
    client.set("su:bad", "{not json")


def users(url: str) -> RedisLookup:
    return RedisLookup(url, key_template="su:{}", value="json", schema=SCHEMA)


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize(("how", "on_error"), [("left", "error_column"), ("inner", "drop")])
def test_the_sql_join_gives_lookup_joins_rows(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis, how: str, on_error: str
) -> None:
    store_users(redis_client)
    keys = ["u1", "u2", "u1", None, "nobody", "u9", "bad", "u2"] * 30
    orders = spark.createDataFrame(
        [(i, k) for i, k in enumerate(keys)], "order_id bigint, user_id string"
    ).repartition(3)
    orders.createOrReplaceTempView("sql_join_orders")
    source = users(redis_server.url)
    name = f"users_join_{how}_{on_error}"
    register_lookup_join(
        spark, name, source, input="sql_join_orders", on="user_id", how=how, on_error=on_error
    )
    got = spark.sql(f"SELECT * FROM {name}(TABLE(sql_join_orders))")
    expected = lookup_join(orders, source, on="user_id", how=how, on_error=on_error)
    assert got.columns == expected.columns
    collected = got.collect()
    assert sorted(map(tuple, collected), key=repr) == rows(expected)
    by_key = {r.order_id: r for r in collected}
    assert sum(1 for r in collected if r.user_id == "u9") == 2 * 30  # 1:N: two rows each
    assert by_key[0].name == "Ada"
    if on_error == "error_column":
        assert "su:bad" in (by_key[6].enrich_error or "")


def test_a_table_with_other_columns_is_named(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    orders = spark.createDataFrame([(1, "u1")], "order_id bigint, user_id string")
    register_lookup_join(
        spark, "users_join_cols", users(redis_server.url), input=orders, on="user_id"
    )
    other = spark.createDataFrame([("u1", 1)], "user_id string, n bigint")
    other.createOrReplaceTempView("sql_join_other")
    with pytest.raises(Exception, match="registered for \\['order_id', 'user_id'\\]"):
        spark.sql("SELECT * FROM users_join_cols(TABLE(sql_join_other))").collect()
    with pytest.raises(ValueError, match="no column 'uid'"):
        register_lookup_join(spark, "x", users(redis_server.url), input=orders, on="uid")
