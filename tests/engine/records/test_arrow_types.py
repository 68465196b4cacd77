"""Dimension types as Arrow types, and converted values as Arrow arrays of those types."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from enrich import Schema
from enrich.engine.records.arrow_types import arrow_schema, arrow_type


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("string", pa.string()),
        ("varchar(3)", pa.string()),
        ("tinyint", pa.int8()),
        ("smallint", pa.int16()),
        ("int", pa.int32()),
        ("bigint", pa.int64()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("decimal", pa.decimal128(10, 0)),
        ("decimal(10,2)", pa.decimal128(10, 2)),
        ("boolean", pa.bool_()),
        ("binary", pa.binary()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ntz", pa.timestamp("us")),
        ("array<string>", pa.list_(pa.string())),
        ("map<string,int>", pa.map_(pa.string(), pa.int32())),
        (
            "struct<a: int NOT NULL, b array<date>>",
            pa.struct(
                [pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.list_(pa.date32()))]
            ),
        ),
    ],
)
def test_arrow_types(ddl: str, expected: pa.DataType) -> None:
    assert arrow_type(ddl) == expected


def test_converted_values_build_arrow_columns() -> None:
    schema = Schema.of(
        "at timestamp, d date, price decimal(10,2), tags array<string>, "
        "addr struct<city string, zip int>, attrs map<string,string>"
    )
    row = schema.coerce(
        {
            "at": "2024-05-01T14:30:00+02:00",
            "d": "2024-05-01",
            "price": 19.99,
            "tags": ["a", None],
            "addr": {"city": "Oslo", "zip": "150"},
            "attrs": {"k": "v"},
        }
    )
    arrow = arrow_schema(schema, [f"dim_{n}" for n in schema.names])
    assert arrow.names == [f"dim_{n}" for n in schema.names]
    table = pa.Table.from_arrays(
        [pa.array([v, None], type=f.type) for v, f in zip(row, arrow, strict=True)], schema=arrow
    )
    assert table.to_pylist()[0] == {
        "dim_at": datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc),
        "dim_d": date(2024, 5, 1),
        "dim_price": Decimal("19.99"),
        "dim_tags": ["a", None],
        "dim_addr": {"city": "Oslo", "zip": 150},
        "dim_attrs": [("k", "v")],
    }
    assert table.to_pylist()[1] == dict.fromkeys(arrow.names)
