"""Result rows -> the answers the SPI describes, for a batch of keys or a whole table.

Rows come in the layout of :mod:`connectors.sql.target` (the key column(s), then the
schema's fields), as driver records (anything with ``.get(name)``, such as asyncpg's
``Record``) or plain tuples (aiomysql). :class:`RowReader` turns them into:

* for a batch (:meth:`RowReader.answers`): each asked key -> its row as a tuple in schema
  order, a list of tuples when the table holds several rows for it (a 1:N join), None
  when it holds none (a miss), or the key's own :class:`~enrich.spi.DecodeError` when one
  of its rows does not fit the schema (its other keys are unaffected);
* for a full cache (:func:`dimension_pages`): pages of ``({store key: answer}, bytes)``
  read from rows ordered by key, a key's rows never split across two pages.

Keys are matched by value: the key a database returns is compared with the key asked
after :func:`store_key` (a ``uuid`` comes back as a ``UUID`` and is matched by its text,
a ``numeric`` as a ``Decimal`` equal to the int asked, ``bytea`` as bytes).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Hashable, Iterable, Sequence
from typing import Any

from enrich.spi import DecodeError, Schema, short

__all__ = ("RowReader", "dimension_pages", "fit_key", "store_key")

# Key columns' kinds, as a dialect reads them from the statement: what a key part must be.
KEY_KINDS = ("int", "text", "bytes", "any")


def _part(value: Any) -> Any:
    kind = type(value)
    if kind is int or kind is str or kind is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def store_key(key: Any) -> Hashable:
    """A key as rows name it (a tuple for a composite key), for matching and full caches."""
    if type(key) is tuple:
        return tuple(_part(part) for part in key)
    return _part(key)  # type: ignore[no-any-return]


def fit_key(key: Any, kinds: Sequence[str]) -> Any:
    """``key`` as the statement's parameters take it: a scalar for one key column, a tuple
    of ``len(kinds)`` parts for a composite key, each part of its column's kind.

    Raises:
        TypeError: the key has another shape, or a part does not fit its column.
    """
    parts = key if type(key) is tuple else (key,)
    if len(parts) != len(kinds):
        raise TypeError(f"expected {len(kinds)} key part(s), got {short(key)}")
    for part, kind in zip(parts, kinds, strict=True):
        if kind == "int" and (type(part) is not int):
            raise TypeError(f"key part {short(part)} is not an int, as its column is")
        if kind == "text" and type(part) is not str:
            raise TypeError(f"key part {short(part)} is not a str, as its column is")
        if kind == "bytes" and not isinstance(part, (bytes, bytearray)):
            raise TypeError(f"key part {short(part)} is not bytes, as its column is")
    return key


class RowReader:
    """Decodes rows of one statement's layout (module docstring) against ``schema``.

    Args:
        schema: the dimension's fields.
        key_width: how many key columns lead each row.
        where: what messages name (``postgres table 'users'``).
    """

    def __init__(self, schema: Schema, key_width: int, where: str) -> None:
        self.schema = schema
        self.key_width = key_width
        self.where = where
        self._names = schema.names

    def key(self, row: Sequence[Any]) -> Hashable:
        """The store key of a row."""
        if self.key_width == 1:
            return _part(row[0])  # type: ignore[no-any-return]
        return tuple(_part(row[i]) for i in range(self.key_width))

    def row(self, row: Any) -> tuple[Any, ...]:
        """One row's fields as a tuple in schema order.

        Raises:
            DecodeError: a value does not fit its field (the message names the field).
        """
        if hasattr(row, "get"):
            return self.schema.coerce_dict(row)
        return self.schema.coerce_dict(dict(zip(self._names, row[self.key_width :], strict=True)))

    def group(self, rows: Iterable[Any]) -> dict[Hashable, Any]:
        """Rows -> ``{store key: tuple | [tuple, ...] | DecodeError}``."""
        found: dict[Hashable, Any] = {}
        read = self.row
        for record in rows:
            key = self.key(record)
            try:
                value: Any = read(record)
            except DecodeError as exc:
                if not isinstance(found.get(key), DecodeError):  # the first bad row's reason
                    found[key] = exc
                continue
            before = found.get(key)
            if before is None:
                found[key] = value
            elif isinstance(before, DecodeError):
                continue  # one bad row fails its key: the others of the key change nothing
            elif type(before) is list:
                before.append(value)
            else:
                found[key] = [before, value]
        return found

    def answers(self, keys: Sequence[Any], rows: Iterable[Any]) -> dict[Any, Any]:
        """The answer of each of ``keys`` (asked as the join gives them) from the rows a
        batch statement returned; a key without rows is None (a miss)."""
        found = self.group(rows)
        if not found:
            return dict.fromkeys(keys)
        return {key: found.get(store_key(key)) for key in keys}


def row_bytes(row: Sequence[Any]) -> int:
    """About how many bytes a row took on the wire (text and bytes by length, 8 else)."""
    size = 0
    for value in row:
        if isinstance(value, (str, bytes)):
            size += len(value)
        elif value is not None:
            size += 8
    return size


async def dimension_pages(
    reader: RowReader, pages: AsyncIterator[Sequence[Any]], page_rows: int
) -> AsyncIterator[tuple[dict[Hashable, Any], int]]:
    """Group pages of rows **ordered by key** into ``({store key: answer}, bytes)`` pages
    of about ``page_rows`` rows, holding the last key of a page back until its rows end
    (so a 1:N key's rows are one answer)."""
    pending: list[Any] = []
    size = 0
    async for page in pages:
        pending.extend(page)
        size += sum(map(row_bytes, page))
        if len(pending) < page_rows:
            continue
        last = reader.key(pending[-1])
        cut = len(pending)
        while cut > 0 and reader.key(pending[cut - 1]) == last:
            cut -= 1
        if cut == 0:
            continue  # one key's rows fill the page: read on
        yield reader.group(pending[:cut]), size
        pending, size = pending[cut:], 0
    if pending or size:
        yield reader.group(pending), size
