"""The key rule for Spark: which column types a lookup key may come from.

The rule is :mod:`enrich.lookup.key_rule`' (a key part is a str, an int or bytes), read as
column types: ``string`` (and ``char``/``varchar``), the integral types ``tinyint`` to
``bigint``, and ``binary``. Any other key column (``double``, ``float``, ``decimal``,
``boolean``, ``timestamp``, ``date``, ``array``, ``map``, ``struct``, ...) would fail
every row at run time, so it is refused up front with an error that names the column,
its type and the cast that fixes it: by :func:`enrich.spark.lookup_join` on the driver,
before any job runs, and by the SQL function on its first batch of arguments, before any
lookup (Spark gives a Python UDF no say at analysis time).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

_KEY_TYPES = (StringType, CharType, VarcharType, ByteType, ShortType, IntegerType, LongType)
_RULE = "key columns must be string, an integral type (tinyint to bigint) or binary"


def check_key_columns(schema: StructType, positions: Sequence[int]) -> None:
    """Refuse key columns whose type is no key type, naming the column, its type and a
    cast that fixes it.

    Raises:
        ValueError: a key column is of another type.
    """
    for position in positions:
        field = schema.fields[position]
        kind = field.dataType
        if isinstance(kind, (*_KEY_TYPES, BinaryType, NullType)):
            continue
        raise ValueError(
            f"lookup_join: key column {field.name!r} is {kind.simpleString()}; {_RULE}. "
            f"Cast it first, e.g. {_dataframe_fix(field.name, kind)}"
        )


def _dataframe_fix(name: str, kind: DataType) -> str:
    col = f"F.col({name!r})"
    if isinstance(kind, (DoubleType, FloatType)) or (
        isinstance(kind, DecimalType) and kind.scale == 0
    ):
        return f'{col}.cast("long") for whole numbers, or {col}.cast("string") for their text'
    if isinstance(kind, DecimalType):
        return f'{col}.cast("string") (the decimal\'s text, e.g. "12.50")'
    if isinstance(kind, BooleanType):
        return f'{col}.cast("int") (1 and 0) or {col}.cast("string") ("true" and "false")'
    if isinstance(kind, DateType):
        return f"F.date_format({name!r}, 'yyyy-MM-dd')"
    if isinstance(kind, (TimestampType, TimestampNTZType)):
        return (
            f"F.date_format({name!r}, \"yyyy-MM-dd'T'HH:mm:ss\") or "
            f"F.unix_timestamp({name!r}) (epoch seconds)"
        )
    if isinstance(kind, (ArrayType, MapType, StructType)):
        return (
            f"the parts as columns of their own, passed together in on= (a composite key), "
            f"or F.to_json({name!r})"
        )
    return f'{col}.cast("string")'


def checked_key_arrays(function: str, inputs: Iterator[Any]) -> Iterator[Any]:
    """The SQL function's batches of arguments, after checking their Arrow types once
    (they do not change from batch to batch).

    Raises:
        ValueError: an argument's type is no key type (naming the argument, its type and
            the cast that fixes it).
    """
    first = True
    for arrays in inputs:
        if first:
            columns = arrays if isinstance(arrays, tuple) else (arrays,)
            for number, array in enumerate(columns, start=1):
                _check_arrow_key(function, number, array.type)
            first = False
        yield arrays


def _check_arrow_key(function: str, number: int, kind: pa.DataType) -> None:
    types = pa.types
    if (
        types.is_string(kind)
        or types.is_large_string(kind)
        or types.is_integer(kind)
        or types.is_binary(kind)
        or types.is_large_binary(kind)
        or types.is_null(kind)
    ):
        return
    argument = "the key" if number == 1 else f"key part {number}"
    sql = _sql_name(kind)
    raise ValueError(
        f"{function}(): argument {number} is {sql}; {_RULE}. Cast {argument} first, "
        f"e.g. {_sql_fix(kind)}"
    )


def _sql_name(kind: pa.DataType) -> str:
    types = pa.types
    if types.is_boolean(kind):
        return "boolean"
    if types.is_float64(kind):
        return "double"
    if types.is_float32(kind):
        return "float"
    if types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if types.is_date(kind):
        return "date"
    if types.is_timestamp(kind):
        return "timestamp"
    if types.is_list(kind) or types.is_large_list(kind):
        return "array"
    if types.is_map(kind):
        return "map"
    if types.is_struct(kind):
        return "struct"
    return str(kind)


def _sql_fix(kind: pa.DataType) -> str:
    types = pa.types
    if types.is_floating(kind) or (types.is_decimal(kind) and kind.scale == 0):
        return "CAST(x AS BIGINT) for whole numbers, or CAST(x AS STRING) for their text"
    if types.is_decimal(kind):
        return "CAST(x AS STRING) (the decimal's text)"
    if types.is_boolean(kind):
        return "CAST(x AS INT) (1 and 0) or CAST(x AS STRING) ('true' and 'false')"
    if types.is_date(kind):
        return "date_format(x, 'yyyy-MM-dd')"
    if types.is_timestamp(kind):
        return "date_format(x, \"yyyy-MM-dd'T'HH:mm:ss\") or unix_timestamp(x)"
    if types.is_nested(kind):
        return "its parts as arguments of their own (a composite key), or to_json(x)"
    return "CAST(x AS STRING)"
