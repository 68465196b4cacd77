"""Key column types in Spark: string, tinyint to bigint and binary join; any other type is
refused before any job runs (``lookup_join``) or before any lookup (the SQL function),
naming the column, its type and the cast that fixes it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from connectors.redis import RedisLookup
from enrich.spark import lookup_join
from enrich.spark.sql.lookup_udf import register_lookup
from enrich.testing import FakeSource

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

RULE = "key columns must be string, an integral type (tinyint to bigint) or binary"

REFUSED = [
    ("double", "is double", """F.col('k').cast("long") for whole numbers"""),
    ("float", "is float", """F.col('k').cast("long")"""),
    ("decimal(10,2)", "is decimal(10,2)", """F.col('k').cast("string")"""),
    ("decimal(12,0)", "is decimal(12,0)", """F.col('k').cast("long")"""),
    ("boolean", "is boolean", """F.col('k').cast("int") (1 and 0)"""),
    ("timestamp", "is timestamp", "F.date_format('k', \"yyyy-MM-dd'T'HH:mm:ss\")"),
    ("timestamp_ntz", "is timestamp_ntz", "F.unix_timestamp('k')"),
    ("date", "is date", "F.date_format('k', 'yyyy-MM-dd')"),
    ("array<int>", "is array<int>", "passed together in on= (a composite key)"),
    ("map<string,int>", "is map<string,int>", "F.to_json('k')"),
    ("struct<a:int,b:string>", "is struct<a:int,b:string>", "F.to_json('k')"),
]


@pytest.fixture
def no_job_runs(spark: SparkSession) -> Iterator[None]:
    context = spark.sparkContext
    context.setJobGroup("key-types", "nothing may run")
    yield
    assert list(context.statusTracker().getJobIdsForGroup("key-types")) == []
    context.setJobGroup("", "")


@pytest.mark.parametrize(("ddl", "named", "fix"), REFUSED, ids=[r[0] for r in REFUSED])
def test_lookup_join_refuses_other_key_types_before_any_job(
    spark: SparkSession, no_job_runs: None, ddl: str, named: str, fix: str
) -> None:
    df = spark.createDataFrame([], f"n int, k {ddl}")
    with pytest.raises(ValueError) as raised:
        lookup_join(df, FakeSource(), on="k", on_error="null")
    message = str(raised.value)
    assert message.startswith(f"lookup_join: key column 'k' {named}; {RULE}")
    assert fix in message


def test_a_composite_key_names_its_refused_part(spark: SparkSession, no_job_runs: None) -> None:
    df = spark.createDataFrame([], "region string, amount double")
    with pytest.raises(ValueError, match="key column 'amount' is double"):
        lookup_join(df, FakeSource(), on=["region", "amount"])


@pytest.fixture
def users(redis_client: redis.Redis) -> redis.Redis:
    for key, name in {"1": "Ada", "2": "Bob", "u1": "Bin"}.items():
        redis_client.set(f"user:{key}", json.dumps({"name": name}))
    return redis_client


def test_integral_string_and_binary_key_columns_join(
    spark: SparkSession, redis_server: Any, users: redis.Redis
) -> None:
    source = RedisLookup(
        redis_server.url, key_template="user:{}", value="json", schema="name string"
    )
    df = spark.createDataFrame(
        [(0, 1, 1, 1, 1, "1", b"u1"), (1, 2, 2, 2, 2, "2", b"zz"), (2, None, 3, 2, 9, None, None)],
        "n int, k8 tinyint, k16 smallint, k32 int, k64 bigint, ks string, kb binary",
    )
    for column in ("k8", "k16", "k32", "k64", "ks", "kb"):
        df = lookup_join(df, source, on=column, prefix=f"{column}_")
    out = {r.n: r for r in df.collect()}
    assert [out[n].k8_name for n in range(3)] == ["Ada", "Bob", None]
    assert [out[n].k16_name for n in range(3)] == ["Ada", "Bob", None]
    assert [out[n].k32_name for n in range(3)] == ["Ada", "Bob", "Bob"]
    assert [out[n].k64_name for n in range(3)] == ["Ada", "Bob", None]
    assert [out[n].ks_name for n in range(3)] == ["Ada", "Bob", None]
    assert [out[n].kb_name for n in range(3)] == ["Bin", None, None]


@pytest.mark.parametrize(
    ("expression", "named", "fix"),
    [
        ("CAST(k AS DOUBLE)", "argument 1 is double", "CAST(x AS BIGINT) for whole numbers"),
        ("k = 1", "argument 1 is boolean", "CAST(x AS INT) (1 and 0)"),
        ("CAST(k AS DECIMAL(10,2))", "argument 1 is decimal(10,2)", "CAST(x AS STRING)"),
        ("TIMESTAMP'2024-01-02 03:04:05'", "argument 1 is timestamp", "date_format(x, "),
        ("array(k)", "argument 1 is array", "to_json(x)"),
    ],
)
def test_the_sql_function_refuses_other_key_types_before_any_lookup(
    spark: SparkSession, expression: str, named: str, fix: str
) -> None:
    source = FakeSource({1: ("one",)})
    register_lookup(spark, "dim_key_typed", source, on_error="null")
    spark.createDataFrame([(1,), (2,)], "k bigint").createOrReplaceTempView("typed_keys")
    with pytest.raises(Exception) as raised:
        spark.sql(f"SELECT dim_key_typed({expression}) AS d FROM typed_keys").collect()
    message = str(raised.value)
    assert f"dim_key_typed(): {named}; {RULE}" in message
    assert fix in message


def test_the_sql_function_takes_integral_and_binary_keys(spark: SparkSession) -> None:
    source = FakeSource({1: ("one",), b"b": ("bee",), (2, "x"): ("pair",)})
    register_lookup(spark, "dim_ok", source)
    spark.createDataFrame(
        [(1, b"b", 2, "x"), (3, None, None, "x")], "k bigint, kb binary, k8 tinyint, s string"
    ).createOrReplaceTempView("ok_keys")
    out = spark.sql(
        "SELECT dim_ok(k).value AS a, dim_ok(kb).value AS b, dim_ok(k8, s).value AS c "
        "FROM ok_keys ORDER BY k"
    ).collect()
    assert [(r.a, r.b, r.c) for r in out] == [("one", "bee", "pair"), (None, None, None)]
