"""Stream entries to typed rows: the column rule of the ``redis-stream`` source.

With a user schema, the output has exactly its columns: a column named ``stream_id``
gets the entry id, one named ``stream_key`` the key of the stream the entry was read
from (for a query reading several streams), the corrupt-record column
(``columnNameOfCorruptRecord``, default ``_corrupt_record``, a string) the whole entry
of a malformed one as JSON text, every other column the entry field of the same name,
converted to the column's type. Without a user schema the rows are
``stream_id string, fields map<string,string>`` and nothing is malformed.

A missing field is null and not malformed (as a missing key is to Spark's JSON reader).
A field whose value does not parse as its column's type makes the entry malformed, and
``mode`` says what happens, as in Spark's readers: ``PERMISSIVE`` (default) keeps the row
with that column null and the corrupt-record column set, ``DROPMALFORMED`` leaves the
entry out, ``FAILFAST`` fails the task with an error naming the stream, entry id, field
and value.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
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
# The entry id and the stream's key: each row's source record, which a sink keyed by it
# writes once (the sink SPI names the same columns, enrich.spark.sink.sink_spi; the source
# and the sinks import nothing of each other, and a test holds the two names equal).
ID_COLUMN = "stream_id"
KEY_COLUMN = "stream_key"  # the stream an entry was read from
CORRUPT_COLUMN = "_corrupt_record"  # Spark's spark.sql.columnNameOfCorruptRecord default
SHOWN = 64  # characters of a bad value shown in an error or a log line

log = logging.getLogger("enrich.spark.streams.source")

_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class Mode(enum.Enum):
    """What a malformed entry becomes (Spark readers' ``mode`` option)."""

    PERMISSIVE = "PERMISSIVE"
    DROPMALFORMED = "DROPMALFORMED"
    FAILFAST = "FAILFAST"

    @classmethod
    def of(cls, options: Mapping[str, str]) -> Mode:
        """The ``mode`` option, any case; a bad one names the allowed values."""
        text = str(options.get("mode", cls.PERMISSIVE.value)).strip().upper()
        try:
            return cls(text)
        except ValueError:
            allowed = ", ".join(m.value for m in cls)
            raise ValueError(
                f"option mode must be one of {allowed} (any case), got {options['mode']!r}"
            ) from None


class MalformedEntry(ValueError):
    """A field of a stream entry does not parse as its column's type (``FAILFAST``)."""


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="backslashreplace")


def shown(raw: bytes) -> str:
    """A field value for a message: its text, cut to :data:`SHOWN` characters."""
    text = _text(raw)
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def entry_json(entry_id: bytes, fields: Mapping[bytes, bytes]) -> str:
    """The whole entry as the corrupt-record column holds it:
    ``{"stream_id":"<id>","fields":{"<name>":"<value>",...}}`` (compact, fields in the
    entry's order; bytes that are not UTF-8 as ``\\xNN`` escapes)."""
    body = {"stream_id": _text(entry_id), "fields": {_text(k): _text(v) for k, v in fields.items()}}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


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
    """Turns ``(entry_id, {field: value})`` pairs of one stream into rows of one schema.

    Attributes:
        counts: per ``(column, "missing" | "unparseable")``, how many entries had that
            column set to null (or, for unparseable, were dropped); :meth:`log_counts`
            reports them.
        malformed: entries with at least one unparseable field; ``dropped``: those left
            out (``DROPMALFORMED``); ``entries``: every entry seen.
        examples: the first value per column that did not parse (for the log line).
    """

    def __init__(
        self,
        schema: StructType,
        *,
        mode: Mode = Mode.PERMISSIVE,
        corrupt_column: str = CORRUPT_COLUMN,
        stream: str = "",
    ) -> None:
        self.schema = schema
        self.mode = mode
        self.stream = stream
        self.raw = _is_default(schema)
        self.counts: Counter[tuple[str, str]] = Counter()
        self.entries = self.malformed = self.dropped = 0
        self.examples: dict[str, bytes] = {}
        self._columns: list[tuple[str, bytes, Callable[[bytes], Any] | None]] = []
        self._corrupt: int | None = None  # the corrupt-record column's position
        self._key: int | None = None  # the stream key column's position
        if self.raw:
            return
        for position, field in enumerate(schema.fields):
            if field.name in (ID_COLUMN, KEY_COLUMN, corrupt_column):
                if not isinstance(field.dataType, StringType):
                    role = {ID_COLUMN: "the entry id", KEY_COLUMN: "the stream's key"}.get(
                        field.name, "malformed entries"
                    )
                    raise ValueError(
                        f"redis-stream: column {field.name!r} holds {role} and must be a "
                        f"string, got {field.dataType.simpleString()}"
                    )
                if field.name == corrupt_column and field.name not in (ID_COLUMN, KEY_COLUMN):
                    self._corrupt = position
                elif field.name == KEY_COLUMN:
                    self._key = position
                self._columns.append((field.name, b"", None))
            else:
                converter = _converter(field.name, field.dataType)
                self._columns.append((field.name, field.name.encode(), converter))

    @property
    def columns(self) -> list[tuple[str, bytes, Callable[[bytes], Any] | None]]:
        """Per output column: its name, the entry field it holds, and the converter of
        that field's value (None: the entry id or the corrupt-record column)."""
        return self._columns

    @property
    def key_position(self) -> int | None:
        """The stream key column's position in the output, if the schema names it."""
        return self._key

    @property
    def corrupt_position(self) -> int | None:
        """The corrupt-record column's position in the output, if the schema names it."""
        return self._corrupt

    def row(self, entry_id: bytes, fields: Mapping[bytes, bytes]) -> tuple[Any, ...] | None:
        """One output row; None for a malformed entry in ``DROPMALFORMED`` mode.

        Raises:
            MalformedEntry: a field does not parse, in ``FAILFAST`` mode.
        """
        self.entries += 1
        if self.raw:
            return (entry_id.decode(), {k.decode(): v.decode() for k, v in fields.items()})
        values: list[Any] = []
        bad = False
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
                if self.mode is Mode.FAILFAST:
                    raise MalformedEntry(
                        f"redis-stream: malformed entry in stream {self.stream!r}, id "
                        f"{entry_id.decode()}: field {column!r} value {shown(raw)} does not "
                        f"parse as {self.schema[column].dataType.simpleString()} "
                        f"(mode=FAILFAST; PERMISSIVE keeps the entry, DROPMALFORMED drops it)"
                    ) from None
                bad = True
                self.counts[(column, "unparseable")] += 1
                self.examples.setdefault(column, raw[:SHOWN])
                values.append(None)
        if bad:
            self.malformed += 1
            if self.mode is Mode.DROPMALFORMED:
                self.dropped += 1
                return None
        if self._corrupt is not None:
            values[self._corrupt] = entry_json(entry_id, fields) if bad else None
        if self._key is not None:
            values[self._key] = self.stream
        return tuple(values)

    def log_counts(self) -> None:
        """One warning line if any column was set to null or any entry dropped."""
        if not self.counts:
            return
        parts = [f"{column} {kind} {n}" for (column, kind), n in sorted(self.counts.items())]
        shown_values = ", ".join(f"{c}={shown(v)}" for c, v in self.examples.items())
        dropped = f"; {self.dropped} malformed entries dropped" if self.dropped else ""
        log.warning(
            "redis-stream %r: fields set to null: %s%s%s",
            self.stream,
            "; ".join(parts),
            dropped,
            f" (first unparseable values: {shown_values})" if shown_values else "",
        )

    def statistics(self) -> dict[str, int]:
        """The counts an accumulator adds up (see :mod:`enrich.spark.streams.stream_counts`)."""
        counts = {"entries": self.entries, "malformed": self.malformed, "dropped": self.dropped}
        return {k: v for k, v in counts.items() if v}


def _is_default(schema: StructType) -> bool:
    names = [f.name for f in schema.fields]
    return (
        names == [ID_COLUMN, "fields"]
        and isinstance(schema.fields[1].dataType, MapType)
        and isinstance(schema.fields[0].dataType, StringType)
    )
