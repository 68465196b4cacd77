"""Rows to Kafka records by Spark's Kafka sink's conventions: the columns checked on the
driver, naming the one that is wrong, and each Arrow batch's records."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from enrich.spark.sink.kafka.alo_errors import KafkaAloRefused
from enrich.spark.sink.kafka.alo_settings import AloSettings
from enrich.spark.sink.kafka.record_columns import UNASSIGNED, json_values, plan, records

HEADERS = "array<struct<key:string,value:binary>>"


def settings(**options: str) -> AloSettings:
    return AloSettings.of({"kafka.bootstrap.servers": "h:1", **options})


def test_the_columns_spark_s_kafka_sink_reads() -> None:
    fields = {"key": "string", "value": "binary", "partition": "int", "headers": HEADERS,
              "other": "bigint"}  # fmt: skip
    columns = plan(fields, settings(topic="out"))
    assert (columns.topic, columns.value, columns.json) == ("out", "value", None)
    assert columns.key and columns.partition and columns.headers
    bare = plan({"value": "string", "topic": "string"}, settings())
    assert bare.topic is None and not (bare.key or bare.partition or bare.headers)


@pytest.mark.parametrize(
    ("fields", "options", "message"),
    [
        ({"key": "string"}, {"topic": "t"}, r"no such column \(columns: key\).*valueColumns"),
        ({"value": "int"}, {"topic": "t"}, r"column 'value' .* string or binary, got int"),
        ({"value": "string", "key": "double"}, {"topic": "t"}, r"column 'key' .* got double"),
        ({"value": "string", "partition": "string"}, {"topic": "t"}, r"'partition' .* got str"),
        ({"value": "string", "topic": "int"}, {}, r"column 'topic' .* string, got int"),
        ({"value": "string", "headers": "string"}, {"topic": "t"}, r"'headers' .* got string"),
        ({"value": "string"}, {}, r"needs a topic: .*\(columns: value\)"),
        ({"a": "int"}, {"topic": "t", "valueColumns": "a,b"}, r"column\(s\) 'b' the rows do"),
        ({"key": "string"}, {"topic": "t", "valueColumns": "*"}, r"'\*' leaves no column"),
    ],
)
def test_a_wrong_column_is_refused_by_name(
    fields: dict[str, str], options: dict[str, str], message: str
) -> None:
    with pytest.raises(KafkaAloRefused, match=message):
        plan(fields, settings(**options))


def test_records_carry_every_column_and_nulls() -> None:
    header = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(["k1", None], pa.string()),
            "value": pa.array([b"v1", None], pa.binary()),
            "topic": pa.array(["a", "b"]),
            "partition": pa.array([1, None], pa.int32()),
            "headers": pa.array([[{"key": "h", "value": b"x"}], None], header),
        }
    )
    fields = {"key": "string", "value": "binary", "topic": "string", "partition": "int",
              "headers": HEADERS}  # fmt: skip
    assert list(records(batch, plan(fields, settings()))) == [
        ("a", b"v1", "k1", 1, [("h", b"x")]),
        ("b", None, None, UNASSIGNED, None),
    ]
    # the topic option wins over the column, as in Spark's sink
    assert [r[0] for r in records(batch, plan(fields, settings(topic="out")))] == ["out"] * 2


def test_a_null_topic_without_the_option_fails_naming_the_column() -> None:
    batch = pa.RecordBatch.from_pydict({"value": ["v"], "topic": pa.array([None], pa.string())})
    columns = plan({"value": "string", "topic": "string"}, settings())
    with pytest.raises(KafkaAloRefused, match=r"column 'topic' is null .*'value': 'v'"):
        list(records(batch, columns))


def test_value_columns_write_a_json_object_of_the_row() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    at = pa.array([when], pa.timestamp("us", "UTC"))
    batch = pa.RecordBatch.from_pydict({"order_id": [7], "name": [None], "at": at, "key": ["k"]})
    fields = {"order_id": "bigint", "name": "string", "at": "timestamp", "key": "string"}
    columns = plan(fields, settings(topic="t", valueColumns="*"))
    assert columns.json == ("order_id", "name", "at") and columns.value is None
    [(_, value, key, _, _)] = records(batch, columns)
    assert key == "k"
    assert json.loads(value) == {"order_id": 7, "name": None, "at": "2026-01-02T03:04:05+00:00"}
    assert json_values(batch, ("name", "order_id")) == [b'{"name":null,"order_id":7}']
