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
or TypeError/ValueError/ArithmeticError; :class:`~enrich.lookup.schema.Schema` turns
both into a :class:`~enrich.DecodeError` naming the field and the value.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from .types import ArrayType, AtomicType, DataType, DecimalType, MapType, StructType

try:
    import orjson

    _fast_loads: Callable[[Any], Any] = orjson.loads
except ImportError:  # orjson is the optional "fast" extra
    _fast_loads = json.loads

Converter = Callable[[Any], Any]
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
        return _NATIVE.get(type_.name)
    return None


def converter(type_: DataType) -> Converter:
    """The function converting a raw, non-null value into ``type_``."""
    if isinstance(type_, AtomicType):
        return _ATOMIC[type_.name]
    if isinstance(type_, DecimalType):
        return _decimal(type_.precision, type_.scale)
    if isinstance(type_, ArrayType):
        return _array(type_)
    if isinstance(type_, MapType):
        return _map(type_)
    if isinstance(type_, StructType):
        return _struct(type_)
    raise TypeError(f"not a dimension type: {type_!r}")


# -- scalars ------------------------------------------------------------------------------
def _text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw).decode("utf-8")
    raise TypeError(f"not text: {type(raw).__name__}")


def _to_string(raw: Any) -> str:
    if isinstance(raw, (str, bytes, bytearray)):
        return _text(raw)
    if isinstance(raw, bool) or not isinstance(raw, (int, float, Decimal)):
        raise TypeError(type(raw).__name__)
    return str(raw)  # JSON numbers in a string field: keep their spelling


def _integer(bits: int) -> Converter:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def convert(raw: Any) -> int:
        if type(raw) is int:  # the common case first: one check, then the range
            if low <= raw <= high:
                return raw
            raise OverflowError(f"out of range for {bits}-bit integers")
        if isinstance(raw, bool):
            raise TypeError("bool")
        if isinstance(raw, (float, Decimal)):
            if raw != raw.__round__():  # also refuses nan and infinities
                raise ValueError("not integral")
            raw = int(raw)
        elif not isinstance(raw, int):
            raw = int(_text(raw).strip())
        if not low <= raw <= high:
            raise OverflowError(f"out of range for {bits}-bit integers")
        return int(raw)

    return convert


def _to_float(raw: Any) -> float:
    if type(raw) is int:  # a JSON integer in a double field: the common conversion
        return float(raw)
    if isinstance(raw, bool):
        raise TypeError("bool")
    if isinstance(raw, (int, float, Decimal)):
        return float(raw)
    text = _text(raw).strip()
    value = float(text)
    if math.isnan(value) and text.lower() not in ("nan", "+nan", "-nan"):
        raise ValueError("nan")
    return value


_TRUE = {"true", "1", "t", "yes", "y"}
_FALSE = {"false", "0", "f", "no", "n"}


def _to_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    text = _text(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("not a boolean")


def _to_binary(raw: Any) -> bytes:
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    if isinstance(raw, str):  # JSON has no bytes: base64 text
        return base64.b64decode(raw, validate=True)
    raise TypeError(type(raw).__name__)


# Wide enough for any decimal(38, s) and its rounding; construction from text is exact.
_DECIMAL_CONTEXT = Context(prec=80)


def _decimal(precision: int, scale: int) -> Converter:
    quantum = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** (precision - scale)

    def convert(raw: Any) -> Decimal:
        if isinstance(raw, bool):
            raise TypeError("bool")
        if isinstance(raw, Decimal):
            value = raw
        elif isinstance(raw, int):
            value = Decimal(raw)
        elif isinstance(raw, float):
            value = Decimal(repr(raw))  # the shortest text reading back as this float
        else:
            value = Decimal(_text(raw).strip())
        if not value.is_finite():
            raise ValueError("not finite")
        value = value.quantize(quantum, rounding=ROUND_HALF_UP, context=_DECIMAL_CONTEXT)
        if value.copy_abs() >= limit:  # copy_abs: exact (abs() rounds to 28 digits)
            raise OverflowError(f"more than {precision - scale} digits before the point")
        return value

    return convert


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_DAY = date(1970, 1, 1)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_SECONDS_BELOW = 10**11  # epoch numbers of smaller magnitude are seconds, others ms


def _from_epoch(number: int | float | Decimal) -> datetime:
    exact = Decimal(repr(number)) if isinstance(number, float) else Decimal(number)
    if not exact.is_finite():
        raise ValueError("not finite")
    per_unit = 1_000_000 if abs(exact) < _SECONDS_BELOW else 1_000
    micros = int((exact * per_unit).to_integral_value(rounding=ROUND_HALF_UP))
    return _EPOCH + timedelta(microseconds=micros)


def _parse_iso(text: str) -> datetime:
    if text[-1:] in ("Z", "z"):  # fromisoformat reads "Z" only from Python 3.11
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


def _timestamp(utc: bool) -> Converter:
    def convert(raw: Any) -> datetime:
        if isinstance(raw, bool):
            raise TypeError("bool")
        if isinstance(raw, datetime):
            value = raw
        elif isinstance(raw, date):
            value = datetime(raw.year, raw.month, raw.day)
        elif isinstance(raw, (int, float, Decimal)):
            value = _from_epoch(raw)
        else:
            text = _text(raw).strip()
            value = _from_epoch(Decimal(text)) if _NUMBER.fullmatch(text) else _parse_iso(text)
        if utc:
            if value.tzinfo is None:
                return value.replace(tzinfo=timezone.utc)
            return value.astimezone(timezone.utc)
        return value.replace(tzinfo=None)

    return convert


def _to_date(raw: Any) -> date:
    if isinstance(raw, bool):
        raise TypeError("bool")
    if isinstance(raw, datetime):
        return raw.date()
    if isinstance(raw, date):
        return raw
    if isinstance(raw, (float, Decimal)):
        if raw != raw.__round__():
            raise ValueError("not a whole number of days")
        raw = int(raw)
    if isinstance(raw, int):
        return _EPOCH_DAY + timedelta(days=raw)
    text = _text(raw).strip()
    if _INTEGER.fullmatch(text):
        return _EPOCH_DAY + timedelta(days=int(text))
    if len(text) == 10:
        return date.fromisoformat(text)
    return _parse_iso(text).date()


_ATOMIC: dict[str, Converter] = {
    "string": _to_string,
    "tinyint": _integer(8),
    "smallint": _integer(16),
    "int": _integer(32),
    "bigint": _integer(64),
    "float": _to_float,
    "double": _to_float,
    "boolean": _to_bool,
    "binary": _to_binary,
    "date": _to_date,
    "timestamp": _timestamp(utc=True),
    "timestamp_ntz": _timestamp(utc=False),
}

_NATIVE: dict[str, type] = {
    "string": str,
    "double": float,
    "float": float,
    "boolean": bool,
    "binary": bytes,
}


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
