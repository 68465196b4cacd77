"""Reading a whole MySQL/MariaDB dimension for a full cache: the rows in Arrow pages.

The full statement returns the rows ordered by key, read by an unbuffered cursor in pages
of ``page_rows`` rows. Each page is transposed (in C) into columns and handed over as one
Arrow table (the key column, then the fields), so the snapshot is built from columns,
with no tuple or dict per row, when every key has one row and every value already has
its field's type: a ``str`` for a ``string``, an ``int`` within an integer field's range,
a ``float`` for a ``double``, a ``date`` for a ``date``, NULL in a nullable field. The
rows of a page's last key are held back to the next page (its rows may go on there).

Where that does not hold (a 1:N key, a composite key, a value the field converts, such
as a ``Decimal`` for a ``double``), the scan hands that page and every later one to
:func:`connectors.sql.dimension_pages` instead, which decodes row by row with the
:class:`~connectors.sql.RowReader` (a key's rows grouped, a bad row failing its key):
what a live lookup answers, in every case.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connectors.sql import RowReader, dimension_pages
from connectors.sql.answers import row_bytes

# A field's type -> the one Python type its values take unconverted, and its Arrow type.
_PLAIN = {
    "string": (str, pa.string()),
    "bigint": (int, pa.int64()),
    "int": (int, pa.int32()),
    "smallint": (int, pa.int16()),
    "tinyint": (int, pa.int8()),
    "double": (float, pa.float64()),
    "date": (dt.date, pa.date32()),
}
_KEYS = {int: pa.int64(), str: pa.string()}


def plain_types(reader: RowReader) -> list[tuple[type, pa.DataType, bool]] | None:
    """Per field: its values' Python type, its Arrow type, whether NULL is allowed; None
    where the Arrow pages cannot apply (a composite key, a field of another type)."""
    if reader.key_width != 1:
        return None
    types = []
    for field in reader.schema.fields:
        plain = _PLAIN.get(str(field.type))
        if plain is None:
            return None
        types.append((*plain, field.nullable))
    return types


def arrow_page(
    rows: Sequence[Sequence[Any]], types: list[tuple[type, pa.DataType, bool]]
) -> pa.Table | None:
    """``rows`` (each key once, at least one row) as a table, or None when a key repeats
    or a value is not its field's plain type."""
    columns = list(zip(*rows, strict=True))
    kinds = set(map(type, columns[0]))
    if len(kinds) != 1 or (key_type := _KEYS.get(kinds.pop())) is None:
        return None
    arrays = [pa.array(columns[0], key_type)]
    if len(arrays[0]) > 1 and not pc.all(pc.not_equal(arrays[0][1:], arrays[0][:-1])).as_py():
        return None  # a key with several rows (ordered by key: they are neighbours)
    for column, (kind, arrow_type, nullable) in zip(columns[1:], types, strict=True):
        kinds = set(map(type, column))
        kinds.discard(type(None))
        if (kinds and kinds != {kind}) or (not nullable and None in column):
            return None
        try:
            arrays.append(pa.array(column, arrow_type))
        except (pa.ArrowInvalid, OverflowError):  # an int out of its field's range
            return None
    return pa.Table.from_arrays(arrays, [f"c{i}" for i in range(len(arrays))])


async def scan_pages(
    reader: RowReader, pages: AsyncIterator[list[Any]], page_rows: int
) -> AsyncIterator[tuple[Any, int]]:
    """``(Arrow table, bytes)`` pages of rows ordered by key while they fit (module
    docstring), then ``({store key: answer}, bytes)`` pages."""
    types = plain_types(reader)
    if types is None:
        async for answers in dimension_pages(reader, pages, page_rows):
            yield answers
        return
    held: list[Any] = []
    async for page in pages:
        rows = held + page
        last = rows[-1][0]
        cut = len(rows)
        while cut > 0 and rows[cut - 1][0] == last:
            cut -= 1
        if cut == 0:
            held = rows  # one key's rows fill the page: read on
            continue
        table = arrow_page(rows[:cut], types)
        if table is None:
            async for answers in dimension_pages(reader, _after(rows, pages), page_rows):
                yield answers
            return
        held = rows[cut:]
        yield table, table.nbytes
    if held:
        table = arrow_page(held, types)
        if table is not None:
            yield table, table.nbytes
        else:
            yield reader.group(held), sum(map(row_bytes, held))


async def _after(first: list[Any], rest: AsyncIterator[list[Any]]) -> AsyncIterator[list[Any]]:
    yield first
    async for page in rest:
        yield page
