"""The full cache's schedules and settings on the fake clock, with a scripted store."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from enrich import FullCache, FullCacheSource, LoadTimedOut, Schema, lookup_rows
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


class GatedStore(Store):
    """A store whose scan waits for the test to open its gate."""

    def __init__(self) -> None:
        super().__init__()
        self.scanning = threading.Event()
        self.gate: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[dict[Any, Any], int]]:
        self.gate, self.loop = asyncio.Event(), asyncio.get_running_loop()
        self.scanning.set()
        await self.gate.wait()
        async for page in super().scan_dimension(page_rows):
            yield page

    def open(self) -> None:
        assert self.loop is not None and self.gate is not None
        self.loop.call_soon_threadsafe(self.gate.set)


def test_rows_waiting_for_the_first_load_are_held_back_never_timed_out() -> None:
    store = GatedStore()
    store.rows = {1: ("a",), 2: ("b",)}
    clock = FakeClock()
    rows = [{"k": 1}, {"k": 2}, {"k": 3}]
    with ThreadPoolExecutor(1) as pool:
        joined = pool.submit(
            lambda: list(
                lookup_rows(rows, store, on="k", cache=FullCache(), timeout=1.0, clock=clock)
            )  # type: ignore[arg-type]
        )
        assert store.scanning.wait(10)
        clock.advance(30.0)  # the load takes 30 s of the rows' 1 s timeout
        store.open()
        out = joined.result(timeout=20)
    assert [row["value"] for row in out] == ["a", "b", None]


def test_a_load_past_its_bound_fails_the_rows_waiting_for_it_in_one_line() -> None:
    store = GatedStore()
    clock = FakeClock()
    with ThreadPoolExecutor(1) as pool:
        joined = pool.submit(
            lambda: list(
                lookup_rows(
                    [{"k": 1}],
                    store,
                    on="k",
                    cache=FullCache(load_timeout=60),
                    timeout=1.0,
                    clock=clock,
                )  # type: ignore[arg-type]
            )
        )
        assert store.scanning.wait(10)
        clock.advance(59.0)
        assert not joined.done()
        clock.advance(1.0)
        with pytest.raises(
            LoadTimedOut, match=r"^full cache of .*: the load did not end within load_timeout=60s"
        ):
            joined.result(timeout=20)


def test_concurrent_joins_of_one_process_wait_for_one_load() -> None:
    store = GatedStore()
    store.rows = {1: ("a",)}
    cache = FullCache()

    def join() -> list[dict[str, Any]]:
        return list(lookup_rows([{"k": 1}], store, on="k", cache=cache))  # type: ignore[arg-type]

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(join)
        assert store.scanning.wait(10)
        second = pool.submit(join)  # a second task of the process, while the load runs
        store.open()
        assert first.result(timeout=20)[0]["value"] == second.result(timeout=20)[0]["value"] == "a"
    assert store.scans == 1
    later = join()  # a later task (or micro-batch) reads the same snapshot
    assert later[0]["value"] == "a" and store.scans == 1
