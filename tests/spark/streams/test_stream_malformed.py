"""Malformed entries of the redis-stream source follow Spark's reader conventions: ``mode``
PERMISSIVE / DROPMALFORMED / FAILFAST and ``columnNameOfCorruptRecord``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.types import StructType

from enrich.spark import register_data_sources, spark_type, stream_statistics
from enrich.spark.streams.fields import EntryDecoder, MalformedEntry, Mode

pytestmark = [pytest.mark.timeout(240)]

SCHEMA = "stream_id string, order_id long, amount double"
WITH_CORRUPT = SCHEMA + ", _corrupt_record string"


def decoder(ddl: str, **kwargs: Any) -> EntryDecoder:
    schema = spark_type(f"struct<{ddl.replace(' ', ':').replace(',:', ', ')}>")
    assert isinstance(schema, StructType)
    return EntryDecoder(schema, stream="orders", **kwargs)


GOOD = (b"1-0", {b"order_id": b"7", b"amount": b"2.5", b"note": b"x"})
BAD = (b"2-0", {b"order_id": b"x1", b"amount": b"3.5", b"note": "é".encode()})


def test_permissive_keeps_the_entry_and_fills_the_corrupt_column_only_when_named() -> None:
    named = decoder(WITH_CORRUPT)
    assert named.row(*GOOD) == ("1-0", 7, 2.5, None)
    assert named.row(*BAD) == (
        "2-0",
        None,
        3.5,
        '{"stream_id":"2-0","fields":{"order_id":"x1","amount":"3.5","note":"é"}}',
    )
    plain = decoder(SCHEMA)
    assert plain.row(*BAD) == ("2-0", None, 3.5)
    assert (named.entries, named.malformed, named.dropped) == (2, 1, 0)


def test_a_missing_field_is_null_and_not_malformed() -> None:
    d = decoder(WITH_CORRUPT, mode=Mode.FAILFAST)
    assert d.row(b"3-0", {b"amount": b"1"}) == ("3-0", None, 1.0, None)
    assert d.malformed == 0


def test_the_corrupt_column_has_its_own_name_and_must_be_a_string() -> None:
    d = decoder(SCHEMA + ", bad string", corrupt_column="bad")
    assert json.loads(d.row(*BAD)[3]) == {
        "stream_id": "2-0",
        "fields": {"order_id": "x1", "amount": "3.5", "note": "é"},
    }
    with pytest.raises(ValueError, match=r"'_corrupt_record' holds malformed entries.*got int"):
        decoder(SCHEMA + ", _corrupt_record int")


def test_dropmalformed_drops_and_counts() -> None:
    d = decoder(WITH_CORRUPT, mode=Mode.DROPMALFORMED)
    assert d.row(*BAD) is None
    assert d.row(*GOOD) == ("1-0", 7, 2.5, None)
    assert d.statistics() == {"entries": 2, "malformed": 1, "dropped": 1}


def test_failfast_names_stream_entry_field_and_a_bounded_value() -> None:
    d = decoder(SCHEMA, mode=Mode.FAILFAST)
    with pytest.raises(MalformedEntry) as failure:
        d.row(b"2-0", {b"order_id": b"9" * 100 + b"x"})
    message = str(failure.value)
    assert "stream 'orders', id 2-0: field 'order_id' value '" + "9" * 64 + "...'" in message
    assert "bigint" in message and "9" * 65 not in message


@pytest.mark.parametrize("text", ["permissive", "DropMalformed", "FAILFAST"])
def test_mode_is_read_in_any_case(text: str) -> None:
    assert Mode.of({"mode": text}).value == text.upper()


def test_a_bad_mode_names_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"PERMISSIVE, DROPMALFORMED, FAILFAST.*'lenient'"):
        Mode.of({"mode": "lenient"})


# On the shared local Spark, against a real Redis.


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


def fill(client: redis.Redis) -> list[str]:
    return [
        client.xadd("orders", {"order_id": "1", "amount": "2.5"}).decode(),
        client.xadd("orders", {"order_id": "x1", "amount": "abc"}).decode(),
        client.xadd("orders", {"amount": "4"}).decode(),  # missing: not malformed
    ]


def batch(spark: SparkSession, url: str, schema: str, **options: str) -> Any:
    reader = spark.read.format("redis-stream").option("url", url).option("stream", "orders")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.schema(schema).load()


@pytest.mark.spark
def test_batch_read_permissive_fills_the_named_corrupt_column(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    ids = fill(redis_client)
    rows = batch(spark_sources, redis_server.url, WITH_CORRUPT).collect()
    assert [tuple(r) for r in rows] == [
        (ids[0], 1, 2.5, None),
        (ids[1], None, None, json.dumps(
            {"stream_id": ids[1], "fields": {"order_id": "x1", "amount": "abc"}},
            separators=(",", ":"))),
        (ids[2], None, 4.0, None),
    ]  # fmt: skip
    assert batch(spark_sources, redis_server.url, SCHEMA).columns == [
        "stream_id",
        "order_id",
        "amount",
    ]


@pytest.mark.spark
def test_batch_read_dropmalformed_drops_and_counts_in_stream_statistics(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    ids = fill(redis_client)
    before = stream_statistics().get("orders")
    rows = batch(spark_sources, redis_server.url, SCHEMA, mode="dropmalformed").collect()
    assert [r.stream_id for r in rows] == [ids[0], ids[2]]
    after = stream_statistics()["orders"]
    assert after.dropped - (before.dropped if before else 0) == 1
    assert after.malformed - (before.malformed if before else 0) == 1


@pytest.mark.spark
def test_batch_read_failfast_fails_naming_the_entry(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    ids = fill(redis_client)
    df = batch(spark_sources, redis_server.url, SCHEMA, mode="FAILFAST")
    named = f"stream 'orders', id {ids[1]}: field 'order_id' value 'x1'"
    with pytest.raises(Exception, match=named):
        df.collect()
    with pytest.raises(Exception, match="option mode must be one of"):
        batch(spark_sources, redis_server.url, SCHEMA, mode="strict").collect()


@pytest.mark.spark
def test_a_streaming_query_drops_or_keeps_malformed_entries_and_counts_them(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ids = fill(redis_client)
    before = stream_statistics().get("orders")
    for mode, schema in (("DROPMALFORMED", SCHEMA), ("PERMISSIVE", WITH_CORRUPT)):
        out = tmp_path / mode
        df = (
            spark_sources.readStream.format("redis-stream")
            .option("url", redis_server.url)
            .option("stream", "orders")
            .option("mode", mode)
            .schema(schema)
            .load()
        )
        if mode == "PERMISSIVE":  # the documented way to see them in the progress
            df = df.observe("bad", F.count(F.col("_corrupt_record")).alias("malformed"))
        query = (
            df.writeStream.format("parquet")
            .option("path", str(out / "out"))
            .option("checkpointLocation", str(out / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        rows = spark_sources.read.parquet(str(out / "out")).orderBy("stream_id").collect()
        if mode == "DROPMALFORMED":
            assert [r.stream_id for r in rows] == [ids[0], ids[2]]
        else:
            assert [r.stream_id for r in rows if r._corrupt_record] == [ids[1]]
            assert query.lastProgress["observedMetrics"]["bad"]["malformed"] == 1
    after = stream_statistics()["orders"]
    assert after.malformed - (before.malformed if before else 0) == 2
    assert after.dropped - (before.dropped if before else 0) == 1
