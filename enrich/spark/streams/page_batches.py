"""A page of stream entries as one Arrow record batch: how the ``redis-stream`` source hands
its rows to Spark.

A Python data source that yields ``pyarrow.RecordBatch`` objects skips pyspark's
conversion of each row to Arrow (a Python call per value); this module builds those
batches from ``XRANGE``'s raw reply (``[[id, [field, value, ...]], ...]``, as hiredis
parses it, without redis-py's dict per entry).

The batch holds exactly what :class:`~enrich.spark.streams.fields.EntryDecoder` makes of
the page row by row, and the decoder keeps counting what it counts. Two lanes:

* **columnar**, for the common page: every entry has the same fields in the same order
  (a producer writing one record shape). Each column is cut out of the page by position
  and converted a column at a time: UTF-8 text and binary as they are, integers and
  doubles by Arrow's casts, behind a pattern that only admits what Python's ``int`` /
  ``float`` read the same way (Arrow also reads ``0x1F`` as an integer; the row lane
  calls that malformed). Other types convert value by value with the decoder's own
  converters.
* **rows**, for everything else: a page with another shape, any value the columnar lane
  does not accept (so every malformed entry: ``mode`` and the corrupt-record column
  apply exactly as documented), the default ``stream_id, fields`` schema. Each entry goes
  through :meth:`EntryDecoder.row`, then through pyspark's own converters into Arrow,
  as pyspark would convert the rows itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from .fields import EntryDecoder

# What Arrow's casts read exactly as Python's int() and float() do (values outside fall
# back to the row lane, which decides: e.g. " 5" and "1_000" are ints to Python).
INTEGER = r"^-?[0-9]+$"
DOUBLE = r"(?i)^[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|inf|infinity|nan)$"

_CASTS: dict[type[DataType], tuple[pa.DataType, str | None]] = {
    LongType: (pa.int64(), INTEGER),
    IntegerType: (pa.int32(), INTEGER),
    ShortType: (pa.int16(), INTEGER),
    ByteType: (pa.int8(), INTEGER),
    DoubleType: (pa.float64(), DOUBLE),
    StringType: (pa.string(), None),
}

Raw = Sequence[Any]  # one entry of XRANGE's raw reply: [id, [field, value, ...]]


class _Fallback(Exception):
    """A value the columnar lane does not take: the page goes row by row."""


def arrow_conversion(schema: StructType) -> tuple[pa.Schema, list[Callable[[Any], Any]]] | None:
    """The Arrow schema pyspark expects of a Python source's batches of ``schema``, and
    its per-value converters (pyspark's own, so the row lane converts as it would);
    None when this pyspark has neither (then the source yields rows)."""
    try:
        from pyspark.sql.conversion import LocalDataToArrowConversion
        from pyspark.sql.pandas.types import to_arrow_schema

        try:  # as pyspark's own reader asks it (4.2+ names the zone)
            arrow = to_arrow_schema(schema, timezone="UTC")
        except TypeError:  # 4.1: timestamps in UTC by default
            arrow = to_arrow_schema(schema)
        converters = [LocalDataToArrowConversion._create_converter(f.dataType) for f in schema]
    except (ImportError, TypeError, AttributeError):  # pragma: no cover - other pyspark
        return None
    return arrow, converters


class PageBatches:
    """Turns pages of one stream's raw ``XRANGE`` reply into record batches of ``schema``."""

    def __init__(
        self,
        decoder: EntryDecoder,
        schema: StructType,
        conversion: tuple[pa.Schema, list[Callable[[Any], Any]]],
    ) -> None:
        self.decoder = decoder
        self.arrow, self.converters = conversion
        # Per column: its name, the entry field it holds (None: the entry id or, at the
        # decoder's corrupt position, the corrupt record), its types, the row lane's
        # converter. The default schema (an id and a map of fields) goes row by row.
        self._plan = (
            []
            if decoder.raw
            else [
                (field.name, name or None, field.dataType, self.arrow.field(i).type, convert)
                for i, (field, (_, name, convert)) in enumerate(
                    zip(schema.fields, decoder.columns, strict=True)
                )
            ]
        )

    def batch(self, page: Sequence[Raw]) -> pa.RecordBatch:
        """The page's rows (malformed ones as ``mode`` says) as one batch."""
        if not self.decoder.raw:
            try:
                return self._columnar(page)
            except _Fallback:
                pass
        return self._rows(page)

    def _columnar(self, page: Sequence[Raw]) -> pa.RecordBatch:
        fields = [entry[1] for entry in page]
        names = fields[0][0::2]
        n = len(page)
        # One shape: as many fields everywhere, each name in its place in every entry,
        # and no name twice (then the last one counts: the row lane's dict).
        if len(set(names)) != len(names) or [len(f) for f in fields].count(2 * len(names)) != n:
            raise _Fallback
        for k, name in enumerate(names):
            if [f[2 * k] for f in fields].count(name) != n:
                raise _Fallback
        position = {name: 2 * i + 1 for i, name in enumerate(names)}
        arrays: list[pa.Array] = []
        missing: list[str] = []
        for i, (column, name, spark_type, arrow_type, convert) in enumerate(self._plan):
            if name is None or convert is None:
                if i == self.decoder.corrupt_position:  # a clean page has no corrupt record
                    arrays.append(pa.nulls(n, arrow_type))
                elif i == self.decoder.key_position:
                    arrays.append(pa.array([self.decoder.stream] * n, arrow_type))
                else:
                    arrays.append(_text([entry[0] for entry in page], arrow_type))
                continue
            where = position.get(name)
            if where is None:
                missing.append(column)
                arrays.append(pa.nulls(n, arrow_type))
                continue
            values = [f[where] for f in fields]
            arrays.append(_column(values, spark_type, arrow_type, convert, self.converters[i]))
        self.decoder.entries += n
        for column in missing:
            self.decoder.counts[(column, "missing")] += n
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)

    def _rows(self, page: Sequence[Raw]) -> pa.RecordBatch:
        rows = []
        for entry_id, flat in page:
            row = self.decoder.row(entry_id, dict(zip(flat[0::2], flat[1::2], strict=True)))
            if row is not None:
                rows.append(row)
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in self.converters]
        arrays = [
            pa.array([convert(v) for v in column], field.type)
            for column, convert, field in zip(columns, self.converters, self.arrow, strict=True)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)


def _column(
    values: list[bytes],
    spark_type: DataType,
    arrow_type: pa.DataType,
    convert: Callable[[bytes], Any],
    to_arrow: Callable[[Any], Any],
) -> pa.Array:
    """One column of a clean page (a value it does not take: :class:`_Fallback`)."""
    if isinstance(spark_type, BinaryType):
        return pa.array(values, arrow_type)
    cast = _CASTS.get(type(spark_type))
    try:
        if cast is None:  # value by value: the row lane's converter, then pyspark's
            return pa.array([to_arrow(convert(v)) for v in values], arrow_type)
        target, pattern = cast
        text = _text(values, pa.string())
        # Imported here: the source's module is also imported by Spark's driver-side
        # planners of a query, which read no page (40-65 ms a process).
        import pyarrow.compute as pc

        if pattern is not None and not pc.all(pc.match_substring_regex(text, pattern)).as_py():
            raise _Fallback
        return text.cast(target).cast(arrow_type)
    except (pa.ArrowException, ValueError, ArithmeticError, KeyError, UnicodeDecodeError):
        raise _Fallback from None


def _text(values: list[bytes], arrow_type: pa.DataType) -> pa.Array:
    """Byte strings as UTF-8 text (invalid UTF-8: :class:`_Fallback`)."""
    try:
        return pa.array(values, pa.binary()).cast(arrow_type)
    except pa.ArrowInvalid:
        raise _Fallback from None
