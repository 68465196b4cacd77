"""The MySQL full cache's pages: Arrow tables while every key has one plain row, the row
reader's answers from the first page where not (scripted pages, no server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from connectors.mysql.scan import scan_pages
from connectors.sql import RowReader
from enrich import Schema

READER = RowReader(Schema.of("name string, credit double"), 1, "mysql table 'users'")


async def pages_of(*pages: list[Any]) -> AsyncIterator[list[Any]]:
    for page in pages:
        yield page


async def read(*pages: list[Any]) -> list[Any]:
    return [page async for page, _ in scan_pages(READER, pages_of(*pages), 3)]


def answers(pages: list[Any]) -> dict[Any, Any]:
    found: dict[Any, Any] = {}
    for page in pages:
        if isinstance(page, pa.Table):
            keys, *columns = (column.to_pylist() for column in page.columns)
            found.update(zip(keys, zip(*columns, strict=True), strict=True))
        else:
            found.update(page)
    return found


@pytest.mark.asyncio
async def test_plain_rows_come_as_tables_a_pages_last_key_held_to_the_next() -> None:
    pages = await read([(1, "a", 1.5), (2, None, None), (3, "c", 0.5)], [(4, "d", 2.0)])
    assert all(isinstance(page, pa.Table) for page in pages)
    assert answers(pages) == {
        1: ("a", 1.5),
        2: (None, None),
        3: ("c", 0.5),
        4: ("d", 2.0),
    }


@pytest.mark.asyncio
async def test_from_a_key_with_several_rows_or_a_converted_value_on_the_reader_decides() -> None:
    pages = await read(
        [(1, "a", 1.5), (2, "b", 1.0), (3, "c1", 0.5)],
        [(3, "c2", 0.5), (4, "d", Decimal("2.5"))],
        [(5, "e", 3.0)],
    )
    assert isinstance(pages[0], pa.Table)  # keys 1, 2 (3 held: its rows go on)
    assert not isinstance(pages[-1], pa.Table)
    found = answers(pages)
    assert found[1] == ("a", 1.5) and found[2] == ("b", 1.0)
    assert sorted(found[3]) == [("c1", 0.5), ("c2", 0.5)]
    assert found[4] == ("d", 2.5) and found[5] == ("e", 3.0)
