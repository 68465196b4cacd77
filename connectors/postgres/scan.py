"""Reading a whole PostgreSQL dimension for a full cache, in one read-only transaction.

A load reads one snapshot of the table, in one statement, handed over in pages of about
``page_rows`` keys. The lookups' ``timeout`` does not bound it (the transaction lifts
``statement_timeout``); the full cache's ``load_timeout`` does, and :data:`LOAD_TIMEOUT`
is the driver's own backstop.

Three ways, the first that applies:

* **COPY**, when a unique index holds the key (an int or text column) and every field is
  a ``string``, an integer, a ``double``, a ``boolean`` or a ``date`` read from a column
  of that very type (``Plan.identity``): ``COPY (SELECT ...) TO STDOUT (FORMAT csv)``,
  parsed by Arrow's CSV reader with the types given (an unquoted empty field is NULL, a
  quoted one the empty string; ``t``/``f``; ``NaN``/``Infinity``) on Arrow's threads,
  off the loop, and handed over as one Arrow table (the key column, then the fields):
  no Python object per row. PostgreSQL prints text far faster than a driver decodes
  records, so this reads the table at about the speed of a plain ``COPY``. Reading it
  in one statement also reads one snapshot. (A composite key's rows are handed over as
  pages of ``{key: row tuple}``.);
* the **bulk** way, for the same keys with other field types (a unique index holds the
  key, so there is one row per key and the statement has no ``ORDER BY``; an int or
  text key; ``Plan.identity``): a server-side cursor (``FETCH`` of ``page_rows`` rows),
  each page of records transposed and
  zipped back into row tuples and a dict, in C, with no Python per row;
* otherwise rows **ordered by key** go through :func:`connectors.sql.dimension_pages`
  and the :class:`~connectors.sql.RowReader` (coercion per value, a key's rows grouped
  into one answer across pages, a row that does not fit failing its key alone).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from connectors.sql import RowReader, dimension_pages

from .pool import Handle, Plan

# Field types the CSV path reads (their columns' types checked by Plan.identity).
_CSV_TYPES = {
    "string": pa.string(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
}
_KEY_TYPES = {"int": pa.int64(), "text": pa.string()}
# A load reads the whole table: the lookups' per-statement timeout does not bound it (the
# server's statement_timeout is lifted for its transaction); this does, on the client.
LOAD_TIMEOUT = 1800.0


def copy_types(plan: Plan, reader: RowReader) -> dict[str, pa.DataType] | None:
    """The CSV column types of the COPY path, or None where it does not apply."""
    schema = reader.schema
    if not (plan.unique and plan.identity) or any(k not in _KEY_TYPES for k in plan.kinds):
        return None
    types = {f"k{i}": _KEY_TYPES[kind] for i, kind in enumerate(plan.kinds)}
    for i, field in enumerate(schema.fields):
        kind = _CSV_TYPES.get(str(field.type))
        if kind is None:
            return None
        types[f"f{i}"] = kind
    return types


async def copy_pages(
    handle: Handle, plan: Plan, types: dict[str, pa.DataType], width: int, page_rows: int
) -> AsyncIterator[tuple[Any, int]]:
    """The COPY path (module docstring): one Arrow page (the key column, then the
    fields) for a one-column key; ``{key: row tuple}`` pages for a composite key."""
    assert plan.full_sql is not None
    chunks: list[bytes] = []

    async def keep(chunk: bytes) -> None:
        chunks.append(chunk)

    async with handle.connection() as conn, conn.transaction(readonly=True):
        await conn.execute("SET LOCAL statement_timeout = 0")
        await conn.copy_from_query(plan.full_sql, output=keep, format="csv", timeout=LOAD_TIMEOUT)
    size = sum(map(len, chunks))
    if not size:
        return
    # Arrow's reader parses on its own threads; off the loop, which keeps answering.
    table = await asyncio.to_thread(_parse, chunks, types)
    chunks.clear()
    if width == 1:
        yield table, size
        return
    per_row = size / max(1, table.num_rows)
    for start in range(0, table.num_rows, page_rows):
        page = table.slice(start, page_rows)
        columns = [column.to_pylist() for column in page.columns]
        keys = list(zip(*columns[:width], strict=True))
        rows = zip(*columns[width:], strict=True)
        yield dict(zip(keys, rows, strict=True)), int(per_row * page.num_rows)


def _parse(chunks: list[bytes], types: dict[str, pa.DataType]) -> pa.Table:
    """The CSV text of a COPY as a table of ``types``."""
    return pacsv.read_csv(
        pa.BufferReader(b"".join(chunks)),
        read_options=pacsv.ReadOptions(column_names=list(types)),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=types,
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            null_values=[""],
            true_values=["t"],
            false_values=["f"],
        ),
    )


def _column_bytes(column: Sequence[Any]) -> int:
    sample = next((v for v in column if v is not None), None)
    if isinstance(sample, (str, bytes)):
        return sum(map(len, filter(None, column)))
    return 8 * len(column)


def bulk_page(page: Sequence[Any], width: int) -> tuple[dict[Any, Any], int]:
    """``({key: row tuple}, bytes)`` of a page of unique keys whose values need no
    conversion."""
    columns = list(zip(*page, strict=True))
    keys = columns[0] if width == 1 else list(zip(*columns[:width], strict=True))
    rows = zip(*columns[width:], strict=True)
    return dict(zip(keys, rows, strict=True)), sum(map(_column_bytes, columns))


async def scan_pages(
    handle: Handle, plan: Plan, reader: RowReader, page_rows: int
) -> AsyncIterator[tuple[Any, int]]:
    """Yield ``(page, bytes)`` pages of the whole dimension: an Arrow table (the COPY
    path's, key column first) or ``{store key: answer}``.

    Raises:
        ValueError: the query form without ``full_query``.
        whatever asyncpg raises (the caller translates it).
    """
    if plan.full_sql is None:
        raise ValueError("a full cache of a query= lookup needs full_query=")
    width = reader.key_width
    types = copy_types(plan, reader)
    if types is not None:
        async for answers in copy_pages(handle, plan, types, width, page_rows):
            yield answers
        return
    bulk = plan.unique and plan.identity and all(k in ("int", "text") for k in plan.kinds)
    async with handle.connection() as conn, conn.transaction(readonly=True):
        await conn.execute("SET LOCAL statement_timeout = 0")
        cursor = await conn.cursor(plan.full_sql, timeout=LOAD_TIMEOUT)

        async def pages() -> AsyncIterator[list[Any]]:
            while True:
                page = await cursor.fetch(page_rows, timeout=LOAD_TIMEOUT)
                if not page:
                    return
                yield page

        if bulk:
            async for page in pages():
                yield bulk_page(page, width)
        else:
            async for answers in dimension_pages(reader, pages(), page_rows):
                yield answers
