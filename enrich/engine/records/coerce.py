"""Per-value conversion of stored values (JSON, hash fields, strings) into field types.

:func:`converter` builds, for one type, a function from a raw value to the value of that
type: what a JSON parser returns (str, int, float, Decimal, bool, list, dict), a Redis
byte string, or a Python value already of the type. The rules, each one tested:

* integers: JSON integers, integral floats/decimals and integer text, range-checked for
  ``tinyint`` .. ``bigint``;
* ``float``/``double``: numbers and numeric text (``"nan"``/``"inf"`` spelled out only);
* ``boolean``: true/false, 1/0, and the text ``true/false/t/f/yes/no/y/n/1/0``;
* ``string``: text, or a JSON number in its spelling;
* ``binary``: bytes as they are (a hash field, a string value); a JSON string is base64;
* ``decimal(p,s)``: numbers and numeric text read exactly (a float through its shortest
  round-trip text), rounded half-up to ``s`` digits after the point (as Spark's cast
  does); more than ``p - s`` digits before the point is an error. JSON documents of a
  schema with a decimal field are parsed with ``parse_float=Decimal`` (see
  :func:`json_loads`), so no digit of the stored text is lost;
* ``date``: ISO text (``2024-05-01``; a timestamp's date as written), or a number of days
  since 1970-01-01;
* ``timestamp``: ISO-8601 text as ``datetime.fromisoformat`` reads it, a trailing ``Z``
  included; text without an offset is UTC. A number (or numeric text) is time since the
  epoch: seconds when its magnitude is below 1e11 (fractions kept to the microsecond),
  otherwise milliseconds (1e11 s is the year 5138; 1e11 ms is March 1973). The value is
  an aware ``datetime`` in UTC;
* ``timestamp_ntz``: the same readings as a naive ``datetime``: the wall-clock time as
  written, an offset dropped (Spark's rule); an epoch number gives the UTC wall clock;
* ``array``/``map``/``struct``: JSON arrays and objects, or JSON text of one (in a Redis
  hash a nested field is a JSON text); elements, map values and struct fields may be null
  unless declared ``NOT NULL``; map keys are converted from their text.

A value that does not fit raises :class:`Unfit` (nested: with its path inside the value),
or TypeError/ValueError/ArithmeticError; :class:`~enrich.engine.records.record_schema.Schema` turns
both into a :class:`~enrich.DecodeError` naming the field and the value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from .data_types import ArrayType, AtomicType, DataType, DecimalType, MapType, StructType
from .scalars import ATOMIC, NATIVE, Converter as Converter, decimal_converter

try:
    import orjson

    _fast_loads: Callable[[Any], Any] = orjson.loads
except ImportError:  # orjson is the optional "fast" extra
    _fast_loads = json.loads

# What a failed conversion raises besides Unfit (binascii.Error and JSONDecodeError are
# ValueErrors; decimal.InvalidOperation and OverflowError are ArithmeticErrors).
ERRORS = (TypeError, ValueError, ArithmeticError)


class Unfit(Exception):
    """A value inside a nested value did not fit its type.

    Attributes:
        path: where, relative to the field (``"[2].city"``, ``"['k']"``).
        value: the value that did not fit.
        type: its type's DDL.
    """

    def __init__(self, path: str, value: Any, type: str) -> None:
        super().__init__(path, value, type)
        self.path = path
        self.value = value
        self.type = type

    def inside(self, step: str) -> Unfit:
        return Unfit(step + self.path, self.value, self.type)


def _exact_loads(text: Any) -> Any:
    return json.loads(text, parse_float=Decimal)


def json_loads(exact: bool) -> Callable[[Any], Any]:
    """A JSON parser: orjson (or json) by default; ``exact=True``: json with JSON floats
    read as Decimal (slower, about 5x orjson, so only for schemas holding a decimal)."""
    return _exact_loads if exact else _fast_loads


def has_decimal(type_: DataType) -> bool:
    """Whether ``type_`` is or holds a decimal."""
    if isinstance(type_, DecimalType):
        return True
    if isinstance(type_, ArrayType):
        return has_decimal(type_.element)
    if isinstance(type_, MapType):
        return has_decimal(type_.key) or has_decimal(type_.value)
    if isinstance(type_, StructType):
        return any(has_decimal(f.type) for f in type_.fields)
    return False


def native(type_: DataType) -> type | None:
    """The Python type a raw value may already have to pass unconverted, or None (ints
    are range-checked and nested values are walked, so those always convert)."""
    if isinstance(type_, AtomicType):
        return NATIVE.get(type_.name)
    return None


def converter(type_: DataType) -> Converter:
    """The function converting a raw, non-null value into ``type_``."""
    if isinstance(type_, AtomicType):
        return ATOMIC[type_.name]
    if isinstance(type_, DecimalType):
        return decimal_converter(type_.precision, type_.scale)
    if isinstance(type_, ArrayType):
        return _array(type_)
    if isinstance(type_, MapType):
        return _map(type_)
    if isinstance(type_, StructType):
        return _struct(type_)
    raise TypeError(f"not a dimension type: {type_!r}")


# -- nested -------------------------------------------------------------------------------
def _document(raw: Any, loads: Callable[[Any], Any]) -> Any:
    """A nested value, or JSON text holding one (a Redis hash field, a JSON string)."""
    if isinstance(raw, (str, bytes, bytearray)):
        return loads(raw)
    return raw


def _item(convert: Converter, type_: DataType, step: str, value: Any) -> Any:
    try:
        return convert(value)
    except Unfit as exc:
        raise exc.inside(step) from None
    except ERRORS:
        raise Unfit(step, value, type_.ddl()) from None


def _array(type_: ArrayType) -> Converter:
    element, convert = type_.element, converter(type_.element)
    loads = json_loads(has_decimal(type_))

    def convert_array(raw: Any) -> list[Any]:
        raw = _document(raw, loads)
        if not isinstance(raw, (list, tuple)):
            raise TypeError("not an array")
        return [
            None if item is None else _item(convert, element, f"[{i}]", item)
            for i, item in enumerate(raw)
        ]

    return convert_array


def _map(type_: MapType) -> Converter:
    key_type, value_type = type_.key, type_.value
    convert_key, convert_value = converter(key_type), converter(value_type)
    loads = json_loads(has_decimal(type_))

    def convert_map(raw: Any) -> dict[Any, Any]:
        raw = _document(raw, loads)
        if not isinstance(raw, Mapping):
            raise TypeError("not an object")
        out: dict[Any, Any] = {}
        for key, value in raw.items():
            step = f"[{key!r}]"
            if key is None:
                raise Unfit(step, key, key_type.ddl())
            out[_item(convert_key, key_type, step, key)] = (
                None if value is None else _item(convert_value, value_type, step, value)
            )
        return out

    return convert_map


def _struct(type_: StructType) -> Converter:
    specs = [(f.name, converter(f.type), f.type, f.nullable) for f in type_.fields]
    loads = json_loads(has_decimal(type_))

    def convert_struct(raw: Any) -> dict[str, Any]:
        raw = _document(raw, loads)
        if not isinstance(raw, Mapping):
            raise TypeError("not an object")
        out: dict[str, Any] = {}
        for name, convert, field_type, nullable in specs:
            value = raw.get(name)
            if value is None:
                if not nullable:
                    raise Unfit(f".{name}", None, field_type.ddl() + " NOT NULL")
                out[name] = None
            else:
                out[name] = _item(convert, field_type, f".{name}", value)
        return out

    return convert_struct
