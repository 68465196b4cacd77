"""Async functions in SQL (``register_async_udf``) against a real aiohttp service, on the
suite's pyspark and on 3.5 / 4.1 (``./scripts/dev test-compat``): what the function
receives, one struct per row in order, NULLs, error policies, metrics."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from enrich.spark import async_map, statistics
from enrich.spark.sql import register_async_udf
from tests.spark.functions import Echo, Fetch
from tests.support.http_server import HttpTestServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def url(server: HttpTestServer) -> str:
    return f"http://127.0.0.1:{server.port}/users"


@pytest.fixture
def orders(spark: SparkSession) -> Any:
    df = spark.createDataFrame(
        [(1, "u1", 2.5), (2, "u2", None), (3, "nobody", 1.0)], "id int, key string, amount double"
    )
    df.createOrReplaceTempView("orders")
    return df


def test_a_struct_argument_passes_the_rows_columns_by_name(
    spark: SparkSession, orders: Any
) -> None:
    register_async_udf(spark, "echo_row", Echo(), "seen string, total double")
    got = spark.sql(
        "SELECT id, echo_row(struct(*)) AS e, echo_row(struct(key, amount)) AS two "
        "FROM orders ORDER BY id"
    ).collect()
    assert [r.e.seen for r in got] == ["amount,id,key"] * 3
    assert [r.two.seen for r in got] == ["amount,key"] * 3
    assert [r.e.total for r in got] == [3.5, None, 4.0]  # id + amount, from the names


def test_plain_arguments_are_named_by_arguments_or_by_position(
    spark: SparkSession, orders: Any
) -> None:
    register_async_udf(
        spark, "echo_named", Echo(), "seen string, total double", arguments=("id", "amount")
    )
    register_async_udf(spark, "echo_plain", Echo(), "seen string, total double")
    got = spark.sql(
        "SELECT echo_named(id, amount) AS n, echo_plain(id, amount) AS p FROM orders ORDER BY id"
    ).collect()
    assert [r.n.seen for r in got] == ["amount,id"] * 3
    assert [r.n.total for r in got] == [3.5, None, 4.0]
    assert [r.p.seen for r in got] == ["col1,col2"] * 3


def test_one_struct_per_row_with_nulls_and_reasons(
    spark: SparkSession, http_server: HttpTestServer, orders: Any
) -> None:
    http_server.data.update({"u1": {"name": "Ada"}, "u2": {"name": 7}})
    http_server.fail("boom", 500)
    register_async_udf(
        spark, "fetch_user", Fetch(url(http_server)), "name string", on_error="error_column"
    )
    got = spark.sql(
        "SELECT key, fetch_user(struct(key)) AS u FROM ("
        "  SELECT key FROM orders UNION ALL SELECT 'boom'"
        "  UNION ALL SELECT CAST(NULL AS string))"
    ).collect()
    by_key = {r.key: r.u for r in got}
    assert by_key["u1"].name == "Ada" and by_key["u1"].enrich_error is None
    assert by_key["u2"].name == "7"  # a number read as text, as stored values are
    assert by_key["nobody"] is None  # the function returned None: a NULL struct
    assert by_key["boom"].name is None
    assert by_key["boom"].enrich_error.startswith("ClientResponseError: 500")
    assert by_key[None] is None  # struct(NULL) is a struct: called, and None came back
    assert "None" in [r.key for r in http_server.requests]
    metrics = statistics("fetch_user")
    assert (metrics.rows_in, metrics.errors["ClientResponseError"]) == (5, 1)


def test_a_null_struct_argument_is_not_called(
    spark: SparkSession, http_server: HttpTestServer, orders: Any
) -> None:
    http_server.data["u1"] = {"name": "Ada"}
    register_async_udf(spark, "fetch_some", Fetch(url(http_server)), "name string")
    got = spark.sql("SELECT id, fetch_some(IF(id = 1, struct(key), NULL)) AS u FROM orders")
    names = sorted((r.id, r.u.name if r.u is not None else None) for r in got.collect())
    assert names == [(1, "Ada"), (2, None), (3, None)]
    assert [r.key for r in http_server.requests] == ["u1"]


def test_the_failure_policy_fails_the_query_and_bad_settings_are_named(
    spark: SparkSession, http_server: HttpTestServer, orders: Any
) -> None:
    http_server.fail("u1", 500)
    register_async_udf(spark, "fetch_strict", Fetch(url(http_server)), "name string")
    with pytest.raises(Exception, match="500"):
        spark.sql("SELECT fetch_strict(struct(key)) FROM orders").collect()
    with pytest.raises(ValueError, match=r"on_error must be one of .* for SQL, got 'drop'"):
        register_async_udf(spark, "x", Fetch("http://x"), "name string", on_error="drop")
    with pytest.raises(ValueError, match="arguments must be the distinct names"):
        register_async_udf(spark, "x", Fetch("http://x"), "name string", arguments=("a", "a"))


def test_async_map_runs_on_this_pyspark(spark: SparkSession, orders: Any) -> None:
    out = async_map(orders, Echo(), "seen string, total double", mode="unordered")
    assert sorted((r.id, r.total) for r in out.collect()) == [(1, 3.5), (2, None), (3, 4.0)]
