"""What the ``redis`` sink writes, ``lookup_join`` with a ``RedisLookup`` of the same DDL
schema reads back as exactly the same values: generated schemas (nested types, every
type the DDL parser accepts) and rows, written by real Spark writes into a real Redis."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings, strategies as st
from pyspark.sql import DataFrame, SparkSession

from connectors.redis import RedisLookup
from enrich import Schema
from enrich.spark import lookup_join, register_data_sources

from .sink_values import Kind, canon, types

_COUNTER = itertools.count()


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


def _nullable(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


def _ddl(kinds: list[Kind]) -> str:
    return ", ".join(["k int", *(f"c{i} {kind.ddl}" for i, kind in enumerate(kinds))])


def _assert_read_back(df: DataFrame, url: str, prefix: str, value: str, ddl: str) -> None:
    lookup = RedisLookup(url, key_template=prefix + "{}", value=value, schema=ddl)
    joined = lookup_join(df, lookup, on="k", prefix="d_").collect()
    assert len(joined) == df.count()
    for row in joined:
        for column in df.columns:
            written, read = canon(row[column]), canon(row["d_" + column])
            assert read == written, f"{value} {column} of key {row['k']}: {read} != {written}"


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    kinds=st.lists(types(depth=2, spark_keys=True), min_size=1, max_size=4),
    mode=st.sampled_from(["transactional", "idempotent"]),
    data=st.data(),
)
def test_batch_writes_read_back_exactly_through_lookup_join(
    spark_sources: SparkSession,
    redis_server: Any,
    kinds: list[Kind],
    mode: str,
    data: st.DataObject,
) -> None:
    rows = data.draw(
        st.lists(st.tuples(*(_nullable(kind.values) for kind in kinds)), min_size=1, max_size=6)
    )
    ddl = _ddl(kinds)
    df = spark_sources.createDataFrame([(k, *row) for k, row in enumerate(rows)], schema=ddl)
    url = redis_server.url
    for value in ("json", "hash"):
        prefix = f"rt{next(_COUNTER)}:"
        (df.write.format("redis").option("url", url).option("key", prefix + "{k}")
         .option("value", value).option("mode", mode).mode("append").save())  # fmt: skip
        _assert_read_back(df, url, prefix, value, ddl)


# One column of each type the DDL parser accepts, nested ones included, with extremes.
_EVERY_TYPE = (
    "k int, s string, i8 tinyint, i16 smallint, i32 int, i64 bigint, f float, d double, "
    "small decimal(5,2), wide decimal(38,10), whole decimal(38,0), b boolean, bin binary, "
    "day date, at timestamp, wall timestamp_ntz, "
    "nested array<struct<m: map<string, decimal(12,3)>, t: timestamp, x: binary>>, "
    "keyed map<int, array<double>>"
)


def _every_type_rows() -> list[tuple[Any, ...]]:
    import datetime as dt
    from decimal import Decimal

    from pyspark.sql import Row

    utc = dt.timezone.utc
    at = dt.datetime(2024, 3, 31, 1, 30, 0, 123456, tzinfo=utc)
    full = (
        1, "héllo \u2603 \U0001f600 \"q\" \\ \n", -128, 32767, -(2**31), 2**63 - 1,
        3.4028234663852886e38, float("nan"), Decimal("-999.99"),
        Decimal("1234567890123456789012345678.0123456789"), Decimal("9" * 38), True,
        b"\x00\xff\xfe raw", dt.date(1, 1, 1), at, dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        [Row(m={"a": Decimal("1.500"), "n": None}, t=at, x=b"\x01"), None,
         Row(m=None, t=None, x=None)],
        {1: [float("inf"), -0.0, None], 2: None},
    )  # fmt: skip
    empty = (2, *([None] * (len(full) - 1)))
    extremes = (
        3, "", 127, -32768, 2**31 - 1, -(2**63), float("-inf"), 5e-324, Decimal("0.01"),
        Decimal("-0.0000000001"), Decimal("-" + "9" * 38), False, b"",
        dt.date(9999, 12, 31), dt.datetime(1970, 1, 1, tzinfo=utc), dt.datetime(1, 1, 1),
        [], {},
    )  # fmt: skip
    return [full, empty, extremes]


def test_a_streaming_write_reads_back_exactly_every_type(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Streaming writes (both modes, JSON values and hashes, stream entries) of every
    type at its extremes: the lookup reads the keys back, the lookup's rules the entries."""
    rows = _every_type_rows()
    spark = spark_sources
    batch = spark.createDataFrame(rows, schema=_EVERY_TYPE)
    batch.write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema(batch.schema).parquet(str(tmp_path / "in"))
    url = redis_server.url
    targets = [
        ("transactional", {"key": "sj:{k}", "value": "json"}),
        ("idempotent", {"key": "sh:{k}", "value": "hash"}),
        ("transactional", {"stream": "entries"}),
    ]
    for n, (mode, target) in enumerate(targets):
        writer = (
            stream.writeStream.format("redis")
            .option("url", url)
            .option("mode", mode)
            .option("checkpointLocation", str(tmp_path / f"ck{n}"))
            .trigger(availableNow=True)
        )
        for name, option in target.items():
            writer = writer.option(name, option)
        query = writer.start()
        query.awaitTermination(120)
        assert query.exception() is None
    _assert_read_back(batch, url, "sj:", "json", _EVERY_TYPE)
    _assert_read_back(batch, url, "sh:", "hash", _EVERY_TYPE)
    schema = Schema.of(_EVERY_TYPE)
    by_key = {row["k"]: row for row in batch.collect()}
    entries = redis_client.xrange("entries")
    assert len(entries) == len(rows)
    for _, fields in entries:
        read = schema.coerce({name.decode(): value for name, value in fields.items()})
        written = by_key[read[0]]
        expected = [canon(written[c]) for c in batch.columns]
        # The lookup's rules give timestamps as UTC instants; collect() as local time.
        assert [canon(_local(v)) for v in read] == expected


def _local(value: Any) -> Any:
    import datetime as dt

    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    if isinstance(value, list):
        return [_local(v) for v in value]
    if isinstance(value, dict):
        return {k: _local(v) for k, v in value.items()}
    return value
