"""Stream entries to typed rows: the column rule of the ``redis-stream`` source.

With a user schema, the output has exactly its columns: a column named ``stream_id``
gets the entry id, every other column the entry field of the same name, converted to the
column's type. A field that is missing, or whose value does not parse as the column's
type, becomes null and is counted per column (:class:`EntryDecoder.counts`): one bad
entry never fails a batch. Without a user schema the rows are
``stream_id string, fields map<string,string>``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.types import (
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
    TimestampType,
)

DEFAULT_SCHEMA = "stream_id string, fields map<string,string>"
ID_COLUMN = "stream_id"

log = logging.getLogger("enrich.spark.streams")

_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _integer(bits: int) -> Callable[[bytes], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def parse(raw: bytes) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range for {bits}-bit integers")
        return value

    return parse


def _boolean(raw: bytes) -> bool:
    return _BOOLEANS[raw.decode().strip().lower()]


def _timestamp(raw: bytes) -> dt.datetime:
    text = raw.decode().strip()
    try:  # epoch seconds, as XADD producers often write them
        return dt.datetime.fromtimestamp(float(text), tz=dt.timezone.utc)
    except ValueError:
        return dt.datetime.fromisoformat(text)


def _converter(column: str, spark_type: DataType) -> Callable[[bytes], Any]:
    if isinstance(spark_type, StringType):
        return lambda raw: raw.decode()
    if isinstance(spark_type, BinaryType):
        return bytes
    if isinstance(spark_type, LongType):
        return _integer(64)
    if isinstance(spark_type, IntegerType):
        return _integer(32)
    if isinstance(spark_type, ShortType):
        return _integer(16)
    if isinstance(spark_type, ByteType):
        return _integer(8)
    if isinstance(spark_type, DoubleType | FloatType):
        return float
    if isinstance(spark_type, BooleanType):
        return _boolean
    if isinstance(spark_type, DecimalType):
        return lambda raw: decimal.Decimal(raw.decode())
    if isinstance(spark_type, TimestampType):
        return _timestamp
    if isinstance(spark_type, DateType):
        return lambda raw: dt.date.fromisoformat(raw.decode().strip())
    raise ValueError(
        f"redis-stream: column {column!r} has type {spark_type.simpleString()}, which a "
        f"stream field cannot hold (use string, numbers, boolean, binary, decimal, date "
        f"or timestamp)"
    )


class EntryDecoder:
    """Turns ``(entry_id, {field: value})`` pairs into rows of one schema.

    Attributes:
        counts: per ``(column, "missing" | "unparseable")``, how many entries had that
            column set to null; :meth:`log_counts` reports them.
        examples: the first value per column that did not parse (for the log line).
    """

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self.raw = _is_default(schema)
        self.counts: Counter[tuple[str, str]] = Counter()
        self.examples: dict[str, bytes] = {}
        self._columns: list[tuple[str, bytes, Callable[[bytes], Any] | None]] = []
        if self.raw:
            return
        for field in schema.fields:
            if field.name == ID_COLUMN:
                if not isinstance(field.dataType, StringType):
                    raise ValueError(
                        f"redis-stream: column {ID_COLUMN!r} holds the entry id and must be a "
                        f"string, got {field.dataType.simpleString()}"
                    )
                self._columns.append((field.name, b"", None))
            else:
                converter = _converter(field.name, field.dataType)
                self._columns.append((field.name, field.name.encode(), converter))

    def row(self, entry_id: bytes, fields: Mapping[bytes, bytes]) -> tuple[Any, ...]:
        """One output row; never raises for a missing or bad field (null, counted)."""
        if self.raw:
            return (entry_id.decode(), {k.decode(): v.decode() for k, v in fields.items()})
        values: list[Any] = []
        for column, name, convert in self._columns:
            if convert is None:
                values.append(entry_id.decode())
                continue
            raw = fields.get(name)
            if raw is None:
                self.counts[(column, "missing")] += 1
                values.append(None)
                continue
            try:
                values.append(convert(raw))
            except (ValueError, KeyError, UnicodeDecodeError, ArithmeticError, OverflowError):
                self.counts[(column, "unparseable")] += 1
                self.examples.setdefault(column, raw[:64])
                values.append(None)
        return tuple(values)

    def log_counts(self, stream: str) -> None:
        """One warning line if any column was set to null, naming columns and counts."""
        if not self.counts:
            return
        parts = [f"{column} {kind} {n}" for (column, kind), n in sorted(self.counts.items())]
        shown = ", ".join(f"{c}={v!r}" for c, v in self.examples.items())
        log.warning(
            "redis-stream %r: fields set to null: %s%s",
            stream,
            "; ".join(parts),
            f" (first unparseable values: {shown})" if shown else "",
        )


def _is_default(schema: StructType) -> bool:
    names = [f.name for f in schema.fields]
    return (
        names == [ID_COLUMN, "fields"]
        and isinstance(schema.fields[1].dataType, MapType)
        and isinstance(schema.fields[0].dataType, StringType)
    )
