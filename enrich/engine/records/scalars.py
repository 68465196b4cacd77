"""Converters of raw scalar values (JSON values, Redis byte strings) into atomic types.

The rules are listed in :mod:`enrich.engine.records.coerce`, which builds on these:
:data:`ATOMIC` maps an atomic type's name to its converter, :func:`decimal_converter` builds one for
``decimal(p,s)``, :data:`NATIVE` names the Python types that pass unconverted. A value
that does not fit raises TypeError, ValueError or ArithmeticError.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

Converter = Callable[[Any], Any]


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


def decimal_converter(precision: int, scale: int) -> Converter:
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


ATOMIC: dict[str, Converter] = {
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

NATIVE: dict[str, type] = {
    "string": str,
    "double": float,
    "float": float,
    "boolean": bool,
    "binary": bytes,
}
