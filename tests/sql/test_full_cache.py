"""The full cache of a relational table, on each real server: loaded whole by one ordered
statement read in pages (1:N keys kept together across pages), answered from memory,
served while the database is down, reloaded when it is back."""

from __future__ import annotations

from typing import Any

import pytest

from enrich import FullCache, FullCacheSource
from enrich.engine.runtime import run_sync
from enrich.testing import FakeClock
from tests.sql.conftest import Store

pytestmark = pytest.mark.timeout(90)


def lookup(source: Any, keys: list[Any]) -> dict[Any, Any]:
    return dict(run_sync(lambda: source.lookup_many(keys), timeout=20))


def stats(source: FullCacheSource) -> Any:
    async def read() -> Any:
        return source.statistics()

    return run_sync(read, timeout=10)


def wait_load(source: FullCacheSource) -> None:
    async def wait() -> None:
        await source.dimension().wait_loaded()

    run_sync(wait, timeout=30)


def test_whole_table_loaded_by_pages_with_one_to_many_keys_whole(store: Store) -> None:
    # owner 7 has 25 rows: more than a page of 10, so its rows span pages
    rows = [(i, f"i{i}") for i in range(1, 96)] + [(7, f"extra{i}") for i in range(1, 25)]
    store.table("items", "owner INT, item TEXT", rows)
    items = store.lookup(store.url, table="items", key="owner", schema="item string")
    source = FullCacheSource(items, FullCache(page_rows=10), clock=FakeClock())
    try:
        found = lookup(source, [1, 7, 95, 96])
        assert found[1] == ("i1",) and found[95] == ("i95",) and found[96] is None
        assert sorted(found[7]) == sorted([("i7",)] + [(f"extra{i}",) for i in range(1, 25)])
        assert stats(source).rows == 95
    finally:
        run_sync(source.aclose, timeout=10)


def test_the_snapshot_serves_while_the_database_is_down_and_reloads_after(
    restartable_store: Store,
) -> None:
    store, server = restartable_store, restartable_store.server
    rows = [(i, f"u{i}", 1) for i in range(50)]
    store.table("versioned", "id BIGINT PRIMARY KEY, name TEXT, version INT", rows)
    clock = FakeClock()
    users = store.lookup(
        server.url, table="versioned", key="id", schema="name string, version int", timeout=2
    )
    source = FullCacheSource(users, FullCache(reload_interval=60, page_rows=10), clock=clock)
    try:
        assert lookup(source, [4])[4] == ("u4", 1)
        server.stop()
        clock.advance(60)  # the reload meets a dead server
        wait_load(source)
        failed = stats(source)
        assert (failed.loads, failed.failed_loads, failed.version) == (1, 1, 1)
        assert failed.last_error.startswith("SourceUnavailable")
        assert server.password not in failed.last_error
        # The old snapshot serves, whole, with the database down.
        assert lookup(source, [4, 49, 50]) == {4: ("u4", 1), 49: ("u49", 1), 50: None}
        server.start()
        server.sql("UPDATE versioned SET version = 2")
        clock.advance(FullCache().retry_delay)  # the retry is due
        wait_load(source)
        assert lookup(source, [4])[4] == ("u4", 2)
        assert stats(source).loads == 2
    finally:
        run_sync(source.aclose, timeout=10)
