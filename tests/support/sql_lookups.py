"""What the relational connectors' test folders share (``tests/connectors/postgres``,
``tests/connectors/mysql``, ``tests/connectors/sql``): lookups closed after the test, Arrow
rows read back, and the Arrow types of the ``everything`` tables' fields both servers have."""

from __future__ import annotations

import gc
import sys
from collections.abc import AsyncIterator, Callable
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any, TypeVar

import pyarrow as pa

L = TypeVar("L")


def struct_rows(rows: Any) -> list[tuple[Any, ...] | None]:
    """An Arrow struct array's rows as tuples (None: a null struct)."""
    return [None if row is None else tuple(row.values()) for row in rows.to_pylist()]


async def closed_after(lookup: Callable[..., L]) -> AsyncIterator[Callable[..., L]]:
    """The body of a ``make_lookup`` fixture: ``make(url, **settings)`` builds a
    ``lookup``; every one made has its pool closed when the test is done."""
    made: list[Any] = []

    def make(url: str, **settings: Any) -> L:
        source = lookup(url, **settings)
        made.append(source)
        return source

    yield make
    for source in made:
        await source.aclose()


# The Arrow type of each field of the type tests' schemas, up to the server's own last ones.
EVERY_TYPE_ARROW: list[tuple[str, pa.DataType]] = [
    ("s", pa.string()),
    ("u", pa.string()),
    ("ti", pa.int8()),
    ("si", pa.int16()),
    ("i", pa.int32()),
    ("bi", pa.int64()),
    ("f", pa.float32()),
    ("d", pa.float64()),
    ("dec", pa.decimal128(12, 3)),
    ("b", pa.bool_()),
    ("bin", pa.binary()),
    ("dt", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")),
    ("ntz", pa.timestamp("us")),
    ("arr", pa.list_(pa.int32())),
    ("tags", pa.list_(pa.string())),
    ("m", pa.map_(pa.string(), pa.float64())),
    ("st", pa.struct([("city", pa.string()), ("zip", pa.int32())])),
]

# What both servers' ``everything`` tables give back for row 1's fields ``s`` to ``ntz``.
EVERY_TYPE_SCALARS: tuple[Any, ...] = (
    "héllo",
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    -7,
    300,
    -70000,
    9007199254740993,
    1.5,
    2.25,
    Decimal("123456789.125"),
    True,
    b"\x00\xff\x10",
    date(2024, 5, 1),
    datetime(2024, 5, 1, 10, 30, 45, 123456, tzinfo=timezone.utc),  # written at +02:00
    datetime(2024, 5, 1, 12, 30, 45, 500000),
)


def _driver_socket(unraisable: Any) -> bool:
    """A socket or asyncio transport a database driver left open, collected by GC."""
    value = unraisable.exc_value
    text = str(value) if value is not None else ""
    return isinstance(value, ResourceWarning) and (
        text.startswith("unclosed <socket.socket") or text.startswith("unclosed transport <_")
    )


def collect_driver_sockets() -> None:
    """Collect garbage now, dropping only the sockets and transports a database driver
    left to GC on a failure path (called after each SQL test, by their fixtures).

    aiomysql opens a socket in ``_open_connection`` that it does not close when the
    connect fails part-way (a server restarted or refusing mid-handshake, as the failure
    tests make it); CPython warns when GC collects it, and pytest counts that warning
    against whatever test is running then (a CI run failed
    ``tests/connectors/mysql/test_types.py`` with it). Collected right after the test that caused
    it, such a socket is dropped; every other unraisable warning (an unclosed pool or
    connection object of the connectors themselves among them) goes to pytest as before.
    """
    hook = sys.unraisablehook

    def keep_others(unraisable: Any) -> None:
        if not _driver_socket(unraisable):
            hook(unraisable)

    sys.unraisablehook = keep_others
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook
