"""Every dimension type through Spark: the Spark types of the schema (checked against
Spark's own DDL parser), and lookup_join and the SQL function returning timestamp, date,
decimal, array, struct and map columns with the right values."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession, types as T

from connectors.redis import RedisLookup
from enrich import Schema
from enrich.spark import lookup_join, spark_type
from enrich.spark.sql.lookup_udf import lookup_struct_type, register_lookup

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

SCHEMA = (
    "name string, seen timestamp, born date, price decimal(10,2), tags array<string>, "
    "address struct<city: string, zip: int>, attrs map<string,string>, local timestamp_ntz"
)


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("tinyint", T.ByteType()),
        ("smallint", T.ShortType()),
        ("decimal(10,2)", T.DecimalType(10, 2)),
        ("date", T.DateType()),
        ("timestamp", T.TimestampType()),
        ("timestamp_ntz", T.TimestampNTZType()),
        ("array<string>", T.ArrayType(T.StringType(), containsNull=True)),
        ("map<string,bigint>", T.MapType(T.StringType(), T.LongType(), valueContainsNull=True)),
        (
            "struct<a: int NOT NULL, b: array<date>>",
            T.StructType(
                [
                    T.StructField("a", T.IntegerType(), nullable=False),
                    T.StructField("b", T.ArrayType(T.DateType())),
                ]
            ),
        ),
    ],
)
def test_spark_types(ddl: str, expected: T.DataType) -> None:
    assert spark_type(ddl) == expected


@pytest.mark.parametrize(
    "ddl",
    [
        SCHEMA,
        "a: byte, b: decimal(  16 , 8   ) ",
        "`a b` INT NOT NULL, `c``d` ARRAY<STRUCT<x: BIGINT, y DOUBLE NOT NULL>>",
        "m map<int, array<map<string, decimal(38,38)>>>, f float, s short, bin binary",
        "d decimal, ok boolean",
    ],
)
def test_schemas_parse_as_spark_parses_them(spark: SparkSession, ddl: str) -> None:
    ours = T.StructType(
        [T.StructField(f.name, spark_type(f.type), f.nullable) for f in Schema.of(ddl).fields]
    )
    assert ours == T._parse_datatype_string(ddl)


@pytest.fixture
def dimension(redis_client: redis.Redis) -> None:
    redis_client.set(
        "typed:u1",
        json.dumps(
            {
                "name": "Ada",
                "seen": "2024-05-01T14:30:00+02:00",
                "born": "1990-12-10",
                "price": 19.99,
                "tags": ["a", None],
                "address": {"city": "Oslo", "zip": 150},
                "attrs": {"team": "x"},
                "local": "2024-05-01T14:30:00",
            }
        ),
    )
    redis_client.set("typed:u2", json.dumps({"name": "Bob", "seen": 1714566600, "born": 0}))
    redis_client.set("typed:u3", json.dumps({"name": "Eve", "price": "not a price"}))


def source(url: str) -> RedisLookup:
    return RedisLookup(url, key_template="typed:{}", value="json", schema=SCHEMA)


ADA = {
    "name": "Ada",
    "seen": datetime(2024, 5, 1, 12, 30),  # the session's time zone is UTC
    "born": date(1990, 12, 10),
    "price": Decimal("19.99"),
    "tags": ["a", None],
    "address": {"city": "Oslo", "zip": 150},
    "attrs": {"team": "x"},
    "local": datetime(2024, 5, 1, 14, 30),
}
BOB = dict.fromkeys(ADA) | {
    "name": "Bob",
    "seen": datetime(2024, 5, 1, 12, 30),
    "born": date(1970, 1, 1),
}
BLANK = dict.fromkeys(ADA)


def plain(row: dict[str, Any]) -> dict[str, Any]:
    """A collected row with its struct as a dict."""
    return {k: v.asDict() if isinstance(v, T.Row) else v for k, v in row.items()}


def test_lookup_join_returns_every_type(
    spark: SparkSession, redis_server: Any, dimension: None
) -> None:
    df = spark.createDataFrame([(1, "u1"), (2, "u2"), (3, "u3"), (4, "zz")], "id int, user string")
    out = lookup_join(df, source(redis_server.url), on="user", prefix="d_", on_error="error_column")

    assert [(f.name, f.dataType) for f in out.schema.fields[2:-1]] == [
        (f"d_{f.name}", spark_type(f.type)) for f in Schema.of(SCHEMA).fields
    ]
    rows = sorted(out.collect(), key=lambda r: r.id)
    dims = [plain({k[2:]: v for k, v in r.asDict().items() if k.startswith("d_")}) for r in rows]
    assert dims == [ADA, BOB, BLANK, BLANK]
    assert [r.enrich_error for r in rows[:2] + rows[3:]] == [None, None, None]
    assert rows[2].enrich_error == (
        "decode: redis key b'typed:u3': field 'price': cannot read 'not a price' as decimal(10,2)"
    )


def test_sql_function_returns_the_same_struct(
    spark: SparkSession, redis_server: Any, dimension: None
) -> None:
    register_lookup(spark, "dim_typed", source(redis_server.url), on_error="null")
    spark.createDataFrame(
        [(1, "u1"), (2, "u2"), (3, "u3"), (4, "zz")], "id int, user string"
    ).createOrReplaceTempView("typed_input")

    out = spark.sql("SELECT id, dim_typed(user) AS d FROM typed_input ORDER BY id")

    assert out.schema["d"].dataType == lookup_struct_type(source(redis_server.url))
    rows = out.collect()
    assert [plain(r.d.asDict()) if r.d is not None else None for r in rows] == [
        ADA,
        BOB,
        None,
        None,
    ]
    fields = spark.sql(
        "SELECT d.price, d.tags[0] AS tag, d.address.city, d.attrs['team'] AS team "
        "FROM (SELECT dim_typed(user) AS d FROM typed_input WHERE id = 1)"
    ).collect()
    assert fields[0].asDict() == {
        "price": Decimal("19.99"),
        "tag": "a",
        "city": "Oslo",
        "team": "x",
    }
