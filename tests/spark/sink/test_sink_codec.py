"""The sink's value encoding against the lookup's decoding, without Spark running: every
value the sink writes (a JSON document, a hash field) reads back through ``Schema`` (the
rules ``RedisLookup`` applies) as exactly the value written."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
from hypothesis import given, settings, strategies as st
from pyspark.sql.types import DecimalType, DoubleType, StructField, StructType, TimestampType

from enrich import Schema
from enrich.spark.sink.redis import codec as sink_codec
from enrich.spark.sink.redis.row_writes import RowEncoder, SinkSettings

from .sink_values import Kind, canon, types

UTC = dt.timezone.utc


def _written(kind: Kind) -> st.SearchStrategy[tuple[Kind, object]]:
    return kind.values.map(lambda value: (kind, value))


VALUES = types(depth=2).flatmap(_written)


def _raw(text: str | bytes) -> bytes:
    """A field's text as Redis hands it back."""
    return text.encode() if isinstance(text, str) else text


@settings(max_examples=600, deadline=None, derandomize=True)
@given(VALUES)
def test_a_json_value_reads_back_exactly(drawn: tuple[Kind, object]) -> None:
    kind, value = drawn
    schema = Schema.of(f"v {kind.ddl}")
    document = '{"v":' + sink_codec.json_encoder(kind.spark)(value) + "}"
    json.loads(document)  # valid JSON as the standard library reads it
    (back,) = schema.coerce(schema.loads(document.encode()))
    assert canon(back) == canon(value)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(VALUES)
def test_a_hash_field_reads_back_exactly(drawn: tuple[Kind, object]) -> None:
    kind, value = drawn
    schema = Schema.of(f"v {kind.ddl}")
    (back,) = schema.coerce({"v": _raw(sink_codec.field_encoder(kind.spark)(value))})
    assert canon(back) == canon(value)


def test_decimals_keep_every_digit_and_are_json_numbers() -> None:
    encode = sink_codec.json_encoder(DecimalType(38, 10))
    big = Decimal("-1234567890123456789012345678.0123456789")
    assert encode(big) == "-1234567890123456789012345678.0123456789"
    assert encode(Decimal("1E+3")) == "1000"
    assert json.loads('{"v":' + encode(Decimal("12.30")) + "}", parse_float=Decimal) == {
        "v": Decimal("12.30")
    }


def test_nan_and_infinities_are_spelled_as_spark_json_writer_does() -> None:
    json_text = sink_codec.json_encoder(DoubleType())
    field = sink_codec.field_encoder(DoubleType())
    nan, inf = float("nan"), float("inf")
    assert [json_text(v) for v in (nan, inf, -inf)] == ['"NaN"', '"Infinity"', '"-Infinity"']
    assert [field(v) for v in (nan, inf, -inf)] == ["NaN", "Infinity", "-Infinity"]


@pytest.fixture
def new_york() -> Iterator[None]:
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if saved is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = saved
    time.tzset()


def test_a_rows_naive_local_timestamp_is_written_as_its_utc_instant(new_york: None) -> None:
    """pyspark builds a Row's timestamp as naive local time: the sink writes the instant."""
    local = dt.datetime(2024, 7, 1, 8, 30, 0, 5)  # EDT, UTC-4
    assert sink_codec.timestamp_text(local) == "2024-07-01T12:30:00.000005Z"
    aware = dt.datetime(2024, 7, 1, 12, 30, 0, 5, tzinfo=UTC)
    assert sink_codec.timestamp_text(aware) == "2024-07-01T12:30:00.000005Z"
    (back,) = Schema.of("t timestamp").coerce({"t": sink_codec.timestamp_text(local).encode()})
    assert back == aware


def test_staged_operations_carry_binary_and_control_bytes_unchanged() -> None:
    packed = sink_codec.pack(["h", "k", "f", b'\xff\x00"\\\n', "é\x01"])
    # MessagePack strings one after the other (str32: 0xdb, 4-byte length), unescaped
    assert packed.startswith(b"\xdb\x00\x00\x00\x01h\xdb\x00\x00\x00\x01k")
    assert sink_codec.unpack(packed) == [b"h", b"k", b"f", b'\xff\x00"\\\n', "é\x01".encode()]


def test_a_row_becomes_a_json_document_and_hash_fields_by_column() -> None:
    schema = StructType([StructField("id", DecimalType(5, 2)), StructField("at", TimestampType())])
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    row = (Decimal("1.50"), at)
    key = "k:{id}"
    as_json = RowEncoder(SinkSettings.of({"url": "redis://h", "key": key, "value": "json"}), schema)
    assert as_json.encode(row) == ["s", "k:1.50", '{"id":1.50,"at":"2024-01-02T03:04:05.000006Z"}']
    as_hash = RowEncoder(SinkSettings.of({"url": "redis://h", "key": key}), schema)
    assert as_hash.encode((Decimal("1.50"), None)) == ["h", "k:1.50", "id", "1.50"]
