"""Spark's types for the dimension's types (:mod:`enrich.engine.records.data_types`)."""

from __future__ import annotations

from pyspark.sql import types as T
from pyspark.sql.types import DataType, StructField, StructType

from ..engine.records import data_types as types
from ..engine.records.ddl import parse_type

_SPARK_TYPES: dict[str, DataType] = {
    "string": T.StringType(),
    "tinyint": T.ByteType(),
    "smallint": T.ShortType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
    "binary": T.BinaryType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
    "timestamp_ntz": T.TimestampNTZType(),
}


def spark_type(type_: types.DataType | str) -> DataType:
    """The Spark type of a dimension type, or of its DDL text: ``"bigint"`` is
    ``LongType()``, ``"array<decimal(10,2)>"`` is ``ArrayType(DecimalType(10, 2))``.

    Nested elements, map values and struct fields are nullable unless declared
    ``NOT NULL`` (map keys never are), as in Spark.
    """
    if isinstance(type_, str):
        type_ = parse_type(type_)
    if isinstance(type_, types.AtomicType):
        return _SPARK_TYPES[type_.name]
    if isinstance(type_, types.DecimalType):
        return T.DecimalType(type_.precision, type_.scale)
    if isinstance(type_, types.ArrayType):
        return T.ArrayType(spark_type(type_.element), containsNull=True)
    if isinstance(type_, types.MapType):
        return T.MapType(spark_type(type_.key), spark_type(type_.value), valueContainsNull=True)
    if isinstance(type_, types.StructType):
        return StructType(
            [StructField(f.name, spark_type(f.type), nullable=f.nullable) for f in type_.fields]
        )
    raise TypeError(f"not a dimension type: {type_!r}")
