"""lookup_join and the SQL function against each real relational server (PostgreSQL,
MariaDB), on a local Spark: left, inner, 1:N, composite keys, NULL and missing keys, every
dimension type, a cache, the error column."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession

from enrich import LookupCache
from enrich.spark import lookup_join, statistics
from enrich.spark.sql import register_lookup
from tests.connectors.sql.conftest import STORES, Store, store_of

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

# The same dimensions in each server's SQL.
TABLES = {
    "postgres": """
DROP TABLE IF EXISTS users, accounts, orders, kinds CASCADE;
CREATE TABLE users (id bigint PRIMARY KEY, name text, tier text, credit double precision);
INSERT INTO users VALUES (1, 'Ada', 'gold', 10.5), (2, 'Bob', 'silver', 3.0), (3, 'Cy', NULL, NULL);
CREATE TABLE orders (user_id bigint, item text);
INSERT INTO orders VALUES (1, 'pen'), (1, 'ink'), (2, 'pad');
CREATE TABLE accounts (tenant text, id bigint, plan text, PRIMARY KEY (tenant, id));
INSERT INTO accounts VALUES ('eu', 1, 'free'), ('us', 1, 'pro'), ('eu', 2, 'team');
CREATE TABLE kinds (id bigint PRIMARY KEY, dec numeric(10,2), b boolean, bin bytea, dt date,
  ts timestamptz, ntz timestamp, arr integer[], m jsonb, i smallint);
INSERT INTO kinds VALUES (1, 12.34, true, '\\x0102', '2024-05-01', '2024-05-01 10:00:00+00',
  '2024-05-01 10:00:00', '{1,2}', '{"a": "x"}', 7), (2, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL);
""",
    "mysql": """
DROP TABLE IF EXISTS users, accounts, orders, kinds;
CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT, tier TEXT, credit DOUBLE);
INSERT INTO users VALUES (1, 'Ada', 'gold', 10.5), (2, 'Bob', 'silver', 3.0), (3, 'Cy', NULL, NULL);
CREATE TABLE orders (user_id BIGINT, item TEXT);
INSERT INTO orders VALUES (1, 'pen'), (1, 'ink'), (2, 'pad');
CREATE TABLE accounts (tenant VARCHAR(8), id BIGINT, plan TEXT, PRIMARY KEY (tenant, id));
INSERT INTO accounts VALUES ('eu', 1, 'free'), ('us', 1, 'pro'), ('eu', 2, 'team');
CREATE TABLE kinds (id BIGINT PRIMARY KEY, `dec` DECIMAL(10,2), b BOOLEAN, bin BLOB, dt DATE,
  ts TIMESTAMP NULL, ntz DATETIME, arr JSON, m JSON, i TINYINT);
SET time_zone = '+00:00';
INSERT INTO kinds VALUES (1, 12.34, TRUE, X'0102', '2024-05-01', '2024-05-01 10:00:00',
  '2024-05-01 10:00:00', '[1,2]', '{"a": "x"}', 7), (2, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL);
""",
}
SCHEMA = "name string, tier string, credit double"


@pytest.fixture(params=STORES)
def dims(request: pytest.FixtureRequest) -> Store:
    store = store_of(request.param, request.getfixturevalue(f"{request.param}_server"))
    store.server.sql(TABLES[store.name])
    return store


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize("how", ["left", "inner"])
def test_left_and_inner_with_null_and_missing_keys(
    spark: SparkSession, dims: Store, how: str
) -> None:
    orders = spark.createDataFrame(
        [(10, 1), (11, 2), (12, None), (13, 99), (14, 3), (15, 1)],
        "order_id bigint, user_id bigint",
    ).repartition(2)
    users = dims.lookup(dims.url, table="users", key="id", schema=SCHEMA)

    out = lookup_join(orders, users, on="user_id", how=how, cache=LookupCache(max_rows=100, ttl=60))

    expected = {
        10: (10, 1, "Ada", "gold", 10.5),
        11: (11, 2, "Bob", "silver", 3.0),
        14: (14, 3, "Cy", None, None),
        15: (15, 1, "Ada", "gold", 10.5),
    }
    if how == "left":
        expected |= {12: (12, None, None, None, None), 13: (13, 99, None, None, None)}
    assert out.columns == ["order_id", "user_id", "name", "tier", "credit"]
    assert rows_of(out) == sorted(expected.values(), key=repr)


def test_one_to_many_and_composite_keys(spark: SparkSession, dims: Store) -> None:
    events = spark.createDataFrame(
        [(1, "eu", 1), (2, "us", 1), (3, "us", 2), (4, "eu", None)],
        "event bigint, tenant string, user_id bigint",
    )
    accounts = dims.lookup(dims.url, table="accounts", key=["tenant", "id"], schema="plan string")
    orders = dims.lookup(dims.url, table="orders", key="user_id", schema="item string")

    joined = lookup_join(events, accounts, on=["tenant", "user_id"], how="left")
    many = lookup_join(events, orders, on="user_id", how="inner")

    assert rows_of(joined.select("event", "plan")) == [
        (1, "free"),
        (2, "pro"),
        (3, None),
        (4, None),
    ]
    assert rows_of(many.select("event", "item")) == [
        (1, "ink"),
        (1, "pen"),
        (2, "ink"),
        (2, "pen"),
        (3, "pad"),
    ]


def test_every_type_reaches_spark(spark: SparkSession, dims: Store) -> None:
    keys = spark.createDataFrame([(1,), (2,)], "id bigint")
    kinds = dims.lookup(
        dims.url,
        table="kinds",
        key="id",
        schema="dec decimal(10,2), b boolean, bin binary, dt date, ts timestamp, "
        "ntz timestamp_ntz, arr array<int>, m map<string,string>, i tinyint",
    )

    out = lookup_join(keys, kinds, on="id")

    assert [f.dataType.simpleString() for f in out.schema.fields[1:]] == [
        "decimal(10,2)", "boolean", "binary", "date", "timestamp", "timestamp_ntz",
        "array<int>", "map<string,string>", "tinyint",
    ]  # fmt: skip
    first, second = sorted(out.collect(), key=lambda r: r.id)
    assert first.dec == Decimal("12.34") and first.b is True and bytes(first.bin) == b"\x01\x02"
    assert first.dt == date(2024, 5, 1) and first.ntz == datetime(2024, 5, 1, 10)
    assert first.ts.astimezone(timezone.utc) == datetime(2024, 5, 1, 10, tzinfo=timezone.utc)
    assert first.arr == [1, 2] and first.m == {"a": "x"} and first.i == 7
    assert all(value is None for value in tuple(second)[1:])


def test_error_column_names_an_unreachable_database_without_its_password(
    spark: SparkSession, dims: Store
) -> None:
    orders = spark.createDataFrame([(1,), (2,)], "user_id bigint")
    wrong = dims.url.replace(dims.server.password, "wr0ng-SQL-S3CRET-77ab")
    users = dims.lookup(wrong, table="users", key="id", schema=SCHEMA)

    out = lookup_join(orders, users, on="user_id", on_error="error_column").collect()

    assert all("refused the login" in row.enrich_error for row in out)
    assert all("wr0ng-SQL-S3CRET" not in row.enrich_error for row in out)


def test_sql_function(spark: SparkSession, dims: Store) -> None:
    spark.createDataFrame(
        [(1, 1), (2, 99)], "order_id bigint, user_id bigint"
    ).createOrReplaceTempView(f"{dims.name}_orders")
    function = f"{dims.name}_user"
    register_lookup(spark, function, dims.lookup(dims.url, table="users", key="id", schema=SCHEMA))

    got = spark.sql(
        f"SELECT order_id, u.name FROM (SELECT *, {function}(user_id) AS u "
        f"FROM {dims.name}_orders) ORDER BY order_id"
    ).collect()

    assert [tuple(r) for r in got] == [(1, "Ada"), (2, None)]
    assert statistics(function).rows_in >= 2
