"""How the ``redis`` sink writes each Spark value: the inverse of the lookup's reading rules.

What the sink writes, ``RedisLookup`` reads back with the same schema as the same value
(:mod:`enrich.engine.records.coerce` states the reading rules;
``tests/spark/sink/test_sink_codec.py`` checks each encoding against them). Two forms:

* **JSON** (``value=json`` documents, and any nested value): :func:`json_encoder`;
* **field text** (a hash field, a stream entry's field, a JSON object's map key):
  :func:`field_encoder`; binary stays raw bytes there, a nested value is its JSON text.

=================== =================================== ===================================
Spark type          JSON value                          hash / stream field text
=================== =================================== ===================================
string              string                              the text (UTF-8)
tinyint .. bigint   number (all digits)                 the digits
float, double       number, shortest round-trip digits; the same, ``NaN``, ``Infinity``,
                    ``"NaN"``, ``"Infinity"``,          ``-Infinity``
                    ``"-Infinity"`` (strings, as Spark's
                    JSON writer does: JSON has no NaN)
decimal(p,s)        number with its exact digits        the digits (``-12.340``)
                    (never through a float)
boolean             ``true`` / ``false``                ``true`` / ``false``
binary              string, base64                      the raw bytes
date                ``"2024-05-01"``                    ``2024-05-01``
timestamp           ``"2024-05-01T10:00:00.000001Z"``   the same text, UTC, microseconds
timestamp_ntz       ``"2024-05-01T10:00:00.000001"``    the same text: wall clock, no zone
array<T>            array                               its JSON text
struct<...>         object by field name                its JSON text
map<K,V>            object; keys as field text          its JSON text
                    (binary keys base64)
=================== =================================== ===================================

Nulls: ``null`` in JSON at every level; a null column is left out of a hash or an entry
(Redis has no null; the lookup reads a missing field as null).

Timestamps: the value Spark hands a Python writer is either an aware ``datetime`` (from an
Arrow batch) or a naive one in the worker's local time zone (a ``Row``, as pyspark's
conversion gives it); both are written as the UTC instant. A naive value in a local
zone with daylight saving is ambiguous in the hour repeated each autumn (pyspark drops
that bit when it builds the ``Row``), which is why the sink reads Arrow batches.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any

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
    StructType,
    TimestampNTZType,
    TimestampType,
)

Encode = Callable[[Any], str]
FieldEncode = Callable[[Any], "str | bytes"]

_UTC = dt.timezone.utc
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def json_encoder(type_: DataType) -> Encode:
    """The JSON text of a non-null value of ``type_`` (see the module's table)."""
    if isinstance(type_, StringType):
        return encode_basestring
    if isinstance(type_, _INTEGRAL):
        return _integer_text
    if isinstance(type_, FloatType | DoubleType):
        return _float_json
    if isinstance(type_, DecimalType):
        return decimal_text
    if isinstance(type_, BooleanType):
        return _bool_text
    if isinstance(type_, BinaryType):
        return _base64_json
    if isinstance(type_, DateType):
        return _quoted(_date_text)
    if isinstance(type_, TimestampType):
        return _quoted(timestamp_text)
    if isinstance(type_, TimestampNTZType):
        return _quoted(timestamp_ntz_text)
    if isinstance(type_, ArrayType):
        return _array_json(type_)
    if isinstance(type_, StructType):
        return _struct_json(type_)
    if isinstance(type_, MapType):
        return _map_json(type_)
    raise TypeError(f"the redis sink cannot write values of type {type_.simpleString()}")


def field_encoder(type_: DataType) -> FieldEncode:
    """The text (bytes for binary) of a non-null value of ``type_`` in a hash field or a
    stream entry's field (see the module's table)."""
    if isinstance(type_, StringType):
        return _same
    if isinstance(type_, _INTEGRAL):
        return _integer_text
    if isinstance(type_, FloatType | DoubleType):
        return float_text
    if isinstance(type_, DecimalType):
        return decimal_text
    if isinstance(type_, BooleanType):
        return _bool_text
    if isinstance(type_, BinaryType):
        return bytes
    if isinstance(type_, DateType):
        return _date_text
    if isinstance(type_, TimestampType):
        return timestamp_text
    if isinstance(type_, TimestampNTZType):
        return timestamp_ntz_text
    return json_encoder(type_)


def key_text(type_: DataType) -> Encode:
    """A map key as the text of a JSON object's member name: its field text, binary
    keys base64 (a JSON object's keys are text)."""
    if isinstance(type_, BinaryType):
        return _base64
    encode = field_encoder(type_)
    return encode  # type: ignore[return-value]  # str for every type but binary


# -- scalars ------------------------------------------------------------------------------
def _same(value: Any) -> Any:
    return value


def _integer_text(value: Any) -> str:
    return str(int(value))


def _bool_text(value: Any) -> str:
    return "true" if value else "false"


def float_text(value: Any) -> str:
    """The shortest text reading back as ``value`` (``NaN``, ``Infinity``, ``-Infinity``
    spelled as Spark's JSON writer spells them)."""
    number = float(value)
    if math.isfinite(number):
        return repr(number)
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def _float_json(value: Any) -> str:
    number = float(value)
    if math.isfinite(number):
        return repr(number)
    return f'"{float_text(number)}"'


def decimal_text(value: Any) -> str:
    """A decimal's exact digits in plain notation (``1E+3`` is written ``1000``)."""
    if not isinstance(value, Decimal):
        value = Decimal(value)
    return format(value, "f")


def _base64(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


def _base64_json(value: Any) -> str:
    return f'"{_base64(value)}"'


def _date_text(value: Any) -> str:
    if isinstance(value, dt.datetime):
        value = value.date()
    text: str = value.isoformat()
    return text


def timestamp_text(value: dt.datetime) -> str:
    """The UTC instant of ``value`` to the microsecond, ``Z``-suffixed; a naive ``value``
    is in the local time zone (as pyspark builds a ``Row``)."""
    instant = value.astimezone(_UTC).replace(tzinfo=None)
    return instant.isoformat(timespec="microseconds") + "Z"


def timestamp_ntz_text(value: dt.datetime) -> str:
    """The wall-clock time of ``value`` to the microsecond, without a zone."""
    return value.replace(tzinfo=None).isoformat(timespec="microseconds")


def _quoted(encode: Callable[[Any], str]) -> Encode:
    def quoted(value: Any) -> str:
        return f'"{encode(value)}"'

    return quoted


# -- nested -------------------------------------------------------------------------------
def _array_json(type_: ArrayType) -> Encode:
    element = json_encoder(type_.elementType)

    def encode(value: Any) -> str:
        return "[" + ",".join("null" if v is None else element(v) for v in value) + "]"

    return encode


def _struct_json(type_: StructType) -> Encode:
    names = [encode_basestring(f.name) + ":" for f in type_.fields]
    plain = [f.name for f in type_.fields]
    encoders = [json_encoder(f.dataType) for f in type_.fields]
    specs = list(zip(names, plain, encoders, strict=True))

    def encode(value: Any) -> str:
        # A Row (a tuple, in field order) or a dict (an Arrow struct as pyarrow gives it).
        if isinstance(value, dict):
            items = [value.get(name) for _, name, _ in specs]
        else:
            items = list(value)
        parts = [
            name + ("null" if item is None else enc(item))
            for (name, _, enc), item in zip(specs, items, strict=True)
        ]
        return "{" + ",".join(parts) + "}"

    return encode


def _map_json(type_: MapType) -> Encode:
    key = key_text(type_.keyType)
    value_json = json_encoder(type_.valueType)

    def encode(value: Any) -> str:
        # A dict (a Row's map) or a list of (key, value) pairs (pyarrow's map).
        pairs = value.items() if isinstance(value, dict) else value
        return (
            "{"
            + ",".join(
                encode_basestring(key(k)) + ":" + ("null" if v is None else value_json(v))
                for k, v in pairs
            )
            + "}"
        )

    return encode


# -- staged operations --------------------------------------------------------------------
# A staged operation is its items one after the other, each a MessagePack str32 (0xdb, the
# length as 4 big-endian bytes, the bytes): the commit script's cmsgpack.unpack hands
# them straight to the command as Lua strings (binary-safe, nothing escaped), about half
# the server time a JSON array costs to decode (cjson), which was half of a commit.
STR32 = b"\xdb"
_LENGTH = struct.Struct(">I")


def pack(op: Sequence[str | bytes]) -> bytes:
    """An operation as the commit script reads it: each item (text as UTF-8, bytes as
    they are) a MessagePack string, one after the other, so binary values reach Redis
    unchanged. :func:`unpack` reads it back."""
    parts: list[bytes] = []
    for item in op:
        raw = item.encode("utf-8") if isinstance(item, str) else item
        parts += (STR32, _LENGTH.pack(len(raw)), raw)
    return b"".join(parts)


def unpack(packed: bytes) -> list[bytes]:
    """The items of a packed operation (:func:`pack`), as bytes."""
    items, at = [], 0
    while at < len(packed):
        if packed[at : at + 1] != STR32:
            raise ValueError(f"not a packed operation at byte {at}: {packed[at : at + 8]!r}")
        (size,) = _LENGTH.unpack_from(packed, at + 1)
        items.append(packed[at + 5 : at + 5 + size])
        at += 5 + size
    return items
