"""Hypothesis strategies for the sink's round-trip tests: Spark types, their DDL, values.

:func:`types` draws a :class:`Kind`: a Spark type, the same type as DDL text (what
``RedisLookup`` and ``createDataFrame`` parse), and a strategy of values of the type as
Spark hands them to Python (structs as Rows, maps as dicts). :func:`canon` turns a value
into something ``==`` compares exactly (NaN equal to itself, -0.0 apart from 0.0,
decimals by their exact value, structs by field name).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

UTC = dt.timezone.utc


@dataclass(frozen=True)
class Kind:
    ddl: str
    spark: DataType
    values: st.SearchStrategy[Any]
    key_ok: bool = True  # may be a map key in a Spark test (hashable as collect() gives it)

    def __repr__(self) -> str:
        return self.ddl


def _ints(bits: int) -> st.SearchStrategy[int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return st.one_of(st.sampled_from([low, high, 0, -1]), st.integers(low, high))


def _decimal(precision: int, scale: int) -> Kind:
    # From integers, by text: exact (Decimal arithmetic rounds to 28 digits by default).
    most = 10**precision - 1
    unscaled = st.one_of(st.sampled_from([most, -most, 0, 1, -1]), st.integers(-most, most))
    values = unscaled.map(lambda i: Decimal(f"{i}E-{scale}"))
    return Kind(f"decimal({precision},{scale})", DecimalType(precision, scale), values)


@st.composite
def _decimals(draw: st.DrawFn) -> Kind:
    precision = draw(st.sampled_from([1, 5, 10, 18, 19, 28, 38]))
    scale = draw(st.integers(0, precision))
    return _decimal(precision, scale)


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_TIMESTAMPS = st.datetimes(
    min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.just(UTC)
)

ATOMIC = [
    Kind("string", StringType(), _TEXT),
    Kind("tinyint", ByteType(), _ints(8)),
    Kind("smallint", ShortType(), _ints(16)),
    Kind("int", IntegerType(), _ints(32)),
    Kind("bigint", LongType(), _ints(64)),
    Kind("float", FloatType(), st.floats(width=32), key_ok=False),
    Kind("double", DoubleType(), st.floats(), key_ok=False),
    Kind("boolean", BooleanType(), st.booleans()),
    Kind("binary", BinaryType(), st.binary(max_size=12), key_ok=False),
    Kind("date", DateType(), st.dates()),
    Kind("timestamp", TimestampType(), _TIMESTAMPS),
    Kind("timestamp_ntz", TimestampNTZType(), st.datetimes()),
]


def _nullable(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


def _array(element: Kind) -> Kind:
    values = st.lists(_nullable(element.values), max_size=3)
    return Kind(f"array<{element.ddl}>", ArrayType(element.spark), values, key_ok=False)


def _map(key: Kind, value: Kind) -> Kind:
    values = st.dictionaries(key.values, _nullable(value.values), max_size=3)
    return Kind(f"map<{key.ddl},{value.ddl}>", MapType(key.spark, value.spark), values, False)


def _struct(fields: list[Kind]) -> Kind:
    names = [f"f{i}" for i in range(len(fields))]
    ddl = "struct<" + ",".join(f"{n}: {k.ddl}" for n, k in zip(names, fields, strict=True)) + ">"
    spark = StructType([StructField(n, k.spark) for n, k in zip(names, fields, strict=True)])
    values = st.fixed_dictionaries(
        {n: _nullable(k.values) for n, k in zip(names, fields, strict=True)}
    ).map(lambda d: Row(**{n: d[n] for n in names}))  # hashable: a struct may be a map key
    return Kind(ddl, spark, values, key_ok=all(k.key_ok for k in fields))


def types(depth: int = 2, *, spark_keys: bool = False) -> st.SearchStrategy[Kind]:
    """Types nested at most ``depth`` levels. ``spark_keys``: map keys only of types
    whose values ``collect()`` can put in a dict (no binary, arrays, floats: NaN)."""
    atomic = st.one_of(st.sampled_from(ATOMIC), _decimals())
    if depth == 0:
        return atomic
    inner = types(depth - 1, spark_keys=spark_keys)
    keys = atomic.filter(lambda k: k.key_ok) if spark_keys else atomic
    return st.one_of(
        atomic,
        inner.map(_array),
        st.tuples(keys, inner).map(lambda kv: _map(*kv)),
        st.lists(inner, min_size=1, max_size=3).map(_struct),
    )


def canon(value: Any) -> Any:
    """``value`` in a form ``==`` compares exactly (see the module docstring)."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else ("f", repr(value))
    if isinstance(value, Decimal):
        return ("d", value.as_integer_ratio())  # exact; Spark may change the exponent
    if isinstance(value, bytes | bytearray):
        return ("b", bytes(value))
    if isinstance(value, dict):
        return ("m", sorted(((canon(k), canon(v)) for k, v in value.items()), key=repr))
    if hasattr(value, "asDict"):  # a Row: a struct
        return canon(value.asDict())
    if isinstance(value, list | tuple):
        return [canon(v) for v in value]
    if isinstance(value, dt.datetime):
        return ("t", value.isoformat())
    return value
