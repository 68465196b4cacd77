"""The idempotent writes' commands built a column at a time (an Arrow batch at once) are
byte for byte those built row by row from the row encoder's operations, for generated
schemas and rows; no Spark session, no Redis."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from enrich.spark.sink.redis import frames
from enrich.spark.sink.redis.data_source import _rows
from enrich.spark.sink.redis.row_writes import RowEncoder, SinkSettings

from .sink_values import Kind, types
from .test_sink_columns import _plain

TARGETS = [
    {"stream": "out"},
    {"key": "k:{id}|{c0}", "value": "hash"},
    {"key": "k:{c0}", "value": "json"},
    {"stream": "out", "dead_letter": "dlq", "error_column": "c0"},
    {"key": "k:{id}", "dead_letter": "dlq", "error_column": "c0"},
]


def _batch(schema: StructType, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    columns = [
        pa.array([_plain(row[i]) for row in rows], type=field.type)
        for i, field in enumerate(arrow_schema)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


def _encoder(schema: StructType, **target: str) -> RowEncoder:
    return RowEncoder(SinkSettings.of({"url": "redis://h", "mode": "idempotent", **target}), schema)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    kinds=st.lists(types(depth=2), min_size=1, max_size=4),
    target=st.sampled_from(TARGETS),
    data=st.data(),
)
def test_columnar_commands_equal_the_row_encoders(
    kinds: list[Kind], target: dict[str, str], data: st.DataObject
) -> None:
    schema = StructType(
        [
            StructField("id", LongType()),
            *(StructField(f"c{i}", k.spark) for i, k in enumerate(kinds)),
        ]
    )
    values = st.tuples(*(st.one_of(st.none(), k.values) for k in kinds))
    rows = [(i, *row) for i, row in enumerate(data.draw(st.lists(values, max_size=5)))]
    batch = _batch(schema, rows)
    encoder = _encoder(schema, **target)
    assert frames.is_columnar(encoder)
    try:
        expected = frames.row_commands(encoder, _rows(iter([batch])))
    except ValueError as exc:  # a row needs its key and a key column is null
        with pytest.raises(ValueError) as raised:
            frames.commands(encoder, batch)
        assert str(raised.value) == str(exc)
        return
    built = frames.commands(encoder, batch)
    if built is None:  # a binary key column: the batch goes row by row
        assert isinstance(kinds[0].spark, BinaryType)
        return
    assert built.payload.to_pylist() == expected.payload.to_pylist()
    assert built.replies.tolist() == expected.replies.tolist()


def test_each_target_sends_its_commands() -> None:
    schema = StructType([StructField("id", LongType()), StructField("name", StringType())])
    batch = _batch(schema, [(7, "a\r\nb"), (8, None)])
    stream = frames.commands(_encoder(schema, stream="s"), batch)
    assert stream is not None
    assert stream.payload.to_pylist() == [
        b"*7\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$2\r\nid\r\n$1\r\n7\r\n$4\r\nname\r\n$4\r\na\r\nb\r\n",
        b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$2\r\nid\r\n$1\r\n8\r\n",
    ]
    hashes = frames.commands(_encoder(schema, key="u:{id}"), batch)
    assert hashes is not None
    assert hashes.payload.to_pylist()[1] == (
        b"*2\r\n$3\r\nDEL\r\n$3\r\nu:8\r\n*4\r\n$4\r\nHSET\r\n$3\r\nu:8\r\n$2\r\nid\r\n$1\r\n8\r\n"
    )
    assert hashes.replies.tolist() == [2, 2]
    assert bytes(hashes.joined(1, 2)) == hashes.payload.to_pylist()[1]
    assert bytes(hashes.joined(0, 2)) == b"".join(hashes.payload.to_pylist())


def test_a_null_key_names_the_column_and_a_dead_letter_needs_no_key() -> None:
    schema = StructType([StructField("id", LongType()), StructField("enrich_error", StringType())])
    batch = _batch(schema, [(1, None), (None, "timeout"), (None, None)])
    with pytest.raises(ValueError, match="key column 'id' is null") as raised:
        frames.commands(_encoder(schema, key="u:{id}"), batch)
    assert "{'id': None, 'enrich_error': 'timeout'}" in str(raised.value)  # the first such row
    dead = _encoder(schema, key="u:{id}", dead_letter="dlq")
    first_two = frames.commands(dead, batch.slice(0, 2))
    assert first_two is not None
    assert first_two.replies.tolist() == [2, 1]
    assert first_two.payload.to_pylist()[1] == (
        b"*5\r\n$4\r\nXADD\r\n$3\r\ndlq\r\n$1\r\n*\r\n$12\r\nenrich_error\r\n$7\r\ntimeout\r\n"
    )
    with pytest.raises(ValueError, match=r"name row \{'id': None, 'enrich_error': None\}"):
        frames.commands(dead, batch)


def test_binary_keys_and_formatted_templates_go_row_by_row() -> None:
    schema = StructType([StructField("id", BinaryType()), StructField("n", LongType())])
    batch = _batch(schema, [(b"\xff1", 1)])
    assert frames.commands(_encoder(schema, key="b:{id}"), batch) is None
    assert not frames.is_columnar(_encoder(schema, key="n:{n:05d}"))
    rows = frames.row_commands(_encoder(schema, key="b:{id}"), _rows(iter([batch])))
    assert b"$6\r\nb:\xef\xbf\xbd1\r\n" in rows.payload.to_pylist()[0]  # as the row path: U+FFFD


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))))
def test_doubles_are_written_as_repr_writes_them(values: list[float | None]) -> None:
    texts = frames.field_texts(pa.array(values, pa.float64()), None)
    assert texts.to_pylist() == [None if v is None else repr(v).encode() for v in values]
    wide = [1e-5, 1e-4, 0.1, 591.0, -0.0, 999999999999999.9, 1e15, 9999999999999998.0, 1e16]
    written = frames.field_texts(pa.array(wide, pa.float64()), None).to_pylist()
    assert written == [repr(v).encode() for v in wide]
