"""The columnar staging (an Arrow batch at a time) stages exactly what the row encoder
stages, for generated schemas and rows; no Spark session needed."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings, strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from enrich.spark.sink.redis import columns as sink_columns
from enrich.spark.sink.redis.codec import pack, unpack
from enrich.spark.sink.redis.data_source import _rows
from enrich.spark.sink.redis.row_writes import RowEncoder, SinkSettings

from .sink_values import Kind, types


def _plain(value: Any) -> Any:
    """A generated value as pyarrow takes it (structs as dicts)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return [(k if not hasattr(k, "asDict") else _plain(k), _plain(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _decoded(items: list[bytes]) -> list[list[bytes]]:
    """Staged operations as the commit script's cmsgpack reads them: each item's bytes."""
    return [unpack(item) for item in items]


TARGETS = [
    {"stream": "out"},
    {"key": "k:{id}|{c0}", "value": "hash"},
    {"stream": "out", "dead_letter": "dlq", "error_column": "c0"},
]


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
def test_columnar_staging_equals_the_row_encoders(
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
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    columns = [
        pa.array([_plain(row[i]) for row in rows], type=field.type)
        for i, field in enumerate(arrow_schema)
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema)
    encoder = RowEncoder(SinkSettings.of({"url": "redis://h", **target}), schema)
    assert sink_columns.is_columnar(encoder)
    staged = sink_columns.staged_operations(encoder, batch)
    if staged is None:  # a null or binary key column: the batch goes row by row
        assert "key" in target
        return
    expected = [pack(encoder.encode(row)) for row in _rows(iter([batch]))]
    assert staged == expected  # byte for byte
    assert _decoded(staged) == [
        [i.encode("utf-8") if isinstance(i, str) else i for i in encoder.encode(row)]
        for row in _rows(iter([batch]))
    ]


def test_strings_needing_escapes_and_all_null_rows() -> None:
    schema = StructType([StructField("a", StringType()), StructField("b", LongType())])
    batch = pa.RecordBatch.from_arrays(
        [pa.array(['q"\\\n\x00é', None, "plain"]), pa.array([1, None, None], pa.int64())],
        names=["a", "b"],
    )
    encoder = RowEncoder(SinkSettings.of({"url": "redis://h", "stream": "s"}), schema)
    staged = sink_columns.staged_operations(encoder, batch)
    assert staged is not None
    assert _decoded(staged) == [
        [b"x", b"s", b"a", 'q"\\\n\x00é'.encode(), b"b", b"1"],  # as they are, unescaped
        [b"x", b"s", b"a", b""],
        [b"x", b"s", b"a", b"plain"],
    ]
