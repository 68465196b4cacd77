"""Dimension types as Arrow types; pyarrow is imported on first use only.

The mapping is the one Spark uses between its types and Arrow (pyspark's
``to_arrow_type``), so columns built with it pass through ``mapInArrow`` and Arrow UDFs
unchanged: ``timestamp`` is ``timestamp[us, tz=UTC]``, ``timestamp_ntz`` is
``timestamp[us]``, ``date`` is ``date32``, ``decimal(p,s)`` is ``decimal128(p, s)``,
``array<T>`` a list, ``map<K,V>`` a map and ``struct<...>`` a struct (a ``NOT NULL``
field inside a struct is a non-nullable Arrow field). Values converted by the schema
(``datetime``, ``date``, ``Decimal``, lists, dicts) are what ``pyarrow.array`` takes
for these types.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .data_types import ArrayType, AtomicType, DataType, DecimalType, MapType, StructType
from .ddl import parse_type

if TYPE_CHECKING:
    import pyarrow as pa

    from .record_schema import Schema

__all__ = ("arrow_type", "arrow_schema")

_ATOMIC = {
    "string": "string",
    "tinyint": "int8",
    "smallint": "int16",
    "int": "int32",
    "bigint": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "bool_",
    "binary": "binary",
    "date": "date32",
}


def arrow_type(type_: DataType | str) -> pa.DataType:
    """The Arrow type of a dimension type (or of its DDL text)."""
    import pyarrow as pa

    if isinstance(type_, str):
        type_ = parse_type(type_)
    if isinstance(type_, AtomicType):
        if type_.name == "timestamp":
            return pa.timestamp("us", tz="UTC")
        if type_.name == "timestamp_ntz":
            return pa.timestamp("us")
        factory: Any = getattr(pa, _ATOMIC[type_.name])
        return factory()
    if isinstance(type_, DecimalType):
        return pa.decimal128(type_.precision, type_.scale)
    if isinstance(type_, ArrayType):
        return pa.list_(arrow_type(type_.element))
    if isinstance(type_, MapType):
        return pa.map_(arrow_type(type_.key), arrow_type(type_.value))
    if isinstance(type_, StructType):
        return pa.struct(
            [pa.field(f.name, arrow_type(f.type), nullable=f.nullable) for f in type_.fields]
        )
    raise TypeError(f"not a dimension type: {type_!r}")


def arrow_schema(schema: Schema, names: Any = None) -> pa.Schema:
    """The Arrow schema of a dimension schema's fields, named ``names`` (default: the
    field names). Every column is nullable: a miss gives nulls even in a ``NOT NULL``
    field."""
    return _arrow_schema(schema, schema.names if names is None else tuple(names))


@functools.lru_cache(maxsize=256)  # built once per schema, not per output batch
def _arrow_schema(schema: Schema, names: tuple[str, ...]) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [pa.field(n, arrow_type(f.type)) for n, f in zip(names, schema.fields, strict=True)]
    )
