"""The full cache's schedules and settings on the fake clock, with a scripted store."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

from enrich import FullCache, FullCacheSource, Schema
from enrich.testing import FakeClock

pytestmark = pytest.mark.timeout(30)

# 2026-11-24 14:00:00 UTC
NOON_PLUS_TWO = dt.datetime(2026, 11, 24, 14, 0, tzinfo=dt.timezone.utc).timestamp()


class Store:
    """A listable store of ``{key: (value,)}``; ``scans`` counts full reads."""

    schema = Schema.of("value string")

    def __init__(self) -> None:
        self.rows: dict[Any, Any] = {}
        self.scans = 0

    def store_key(self, key: Any) -> Any:
        return f"k:{key}"

    async def scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[dict[Any, Any], int]]:
        self.scans += 1
        yield {f"k:{k}": v for k, v in self.rows.items()}, 10 * len(self.rows)

    async def lookup_many(self, keys: Any) -> Any:
        raise AssertionError("a full cache never asks the store key by key once loaded")

    async def aclose(self) -> None:
        return None


def test_reload_at_a_time_of_day_runs_on_the_clock() -> None:
    store = Store()
    store.rows = {1: ("a",)}
    clock = FakeClock(1000.0)
    source = FullCacheSource(
        store,  # type: ignore[arg-type]
        FullCache(reload_at="15:30"),
        clock=clock,
        wall=lambda: NOON_PLUS_TWO + clock.now() - 1000.0,
    )

    async def run() -> None:
        assert await source.lookup_many([1, 2]) == {1: ("a",), 2: None}
        store.rows = {1: ("b",)}
        clock.advance(90 * 60 - 1)  # 15:29:59
        assert (await source.lookup_many([1]))[1] == ("a",)
        assert store.scans == 1
        clock.advance(1)  # 15:30: the reload is due
        await source.dimension().wait_loaded()
        assert (await source.lookup_many([1]))[1] == ("b",)
        assert store.scans == 2
        # the next one: tomorrow at 15:30
        assert clock.next_deadline() == pytest.approx(clock.now() + 86400)
        statistics = source.statistics()
        assert statistics is not None and (statistics.loads, statistics.version) == (2, 2)
        await source.aclose()
        assert clock.pending_timers() == 0  # closing stops the schedule

    asyncio.run(run())


def test_next_reload() -> None:
    assert FullCache(reload_interval=30).next_reload(5.0, NOON_PLUS_TWO) == 35.0
    assert FullCache().next_reload(5.0, NOON_PLUS_TWO) is None
    # 13:00 has passed today (14:00 UTC): in 23 hours, or 2 days + 23 hours
    assert FullCache(reload_at="13:00").next_reload(0.0, NOON_PLUS_TWO) == 23 * 3600
    every_3 = FullCache(reload_at="13:00", reload_every_days=3)
    assert every_3.next_reload(0.0, NOON_PLUS_TWO) == (2 * 24 + 23) * 3600
    # 15:00+02:00 is 13:00 UTC; 14:30Z is in half an hour
    assert FullCache(reload_at="15:00+02:00").next_reload(0.0, NOON_PLUS_TWO) == 23 * 3600
    assert FullCache(reload_at="14:30Z").next_reload(0.0, NOON_PLUS_TWO) == 1800


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"reload_interval": 0}, "reload_interval must be a number > 0"),
        ({"reload_at": "25:00"}, "reload_at must be a time of day"),
        ({"reload_at": "03:00", "reload_interval": 60}, "not both"),
        ({"initial_load": "soon"}, "initial_load"),
        ({"max_rows": 0}, "max_rows must be an int >= 1"),
        ({"max_bytes": -1}, "max_bytes must be an int >= 1 or None"),
        ({"retry_delay": None}, "retry_delay must be a number > 0"),
    ],
)
def test_bad_settings_are_named(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FullCache(**settings)
