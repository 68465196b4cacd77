"""The full cache of a relational table, on each real server: loaded whole by one ordered
statement read in pages (1:N keys kept together across pages), answered from memory,
served while the database is down, reloaded when it is back."""

from __future__ import annotations

import pytest

from enrich import FullCache, FullCacheSource, LoadTimedOut, lookup_rows
from enrich.engine.runtime import run_sync
from enrich.testing import FakeClock
from tests.connectors.sql.conftest import Store
from tests.support.full_cache_calls import lookup, stats, wait_load

pytestmark = pytest.mark.timeout(90)


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


MILLION = 1_000_000
_MILLION_SQL = {
    "postgres": (
        "DROP TABLE IF EXISTS million; CREATE TABLE million (id bigint PRIMARY KEY, "
        "name text, tier text, credit double precision); INSERT INTO million SELECT i, "
        "'user-' || i, (ARRAY['gold','silver','bronze'])[1 + i % 3], (i % 1000) / 10.0 "
        f"FROM generate_series(1, {MILLION}) i"
    ),
    "mysql": (
        "DROP TABLE IF EXISTS million; CREATE TABLE million (id BIGINT PRIMARY KEY, "
        "name TEXT, tier TEXT, credit DOUBLE); INSERT INTO million SELECT seq, "
        "CONCAT('user-', seq), ELT(1 + seq % 3, 'gold', 'silver', 'bronze'), "
        f"(seq % 1000) / 10.0 FROM seq_1_to_{MILLION}"
    ),
}


@pytest.mark.timeout(300)
def test_a_million_rows_on_the_defaults_load_once_and_enrich_every_row(store: Store) -> None:
    # FullCache() and the join's defaults (its row timeout included): the load is the
    # cache's own business, bounded by load_timeout, never a row's.
    store.server.sql(_MILLION_SQL[store.name])
    users = store.lookup(
        store.url, table="million", key="id", schema="name string, tier string, credit double"
    )
    cache = FullCache()
    keys = [(i * 7919) % (MILLION + 500) for i in range(20_000)]  # a few beyond the table
    rows = list(lookup_rows(({"user_id": k} for k in keys), users, on="user_id", cache=cache))
    source = FullCacheSource(users, cache)  # the join's cache, by its token
    try:
        assert len(rows) == len(keys)
        for row in rows:
            k = row["user_id"]
            if 1 <= k <= MILLION:
                tier = ("gold", "silver", "bronze")[k % 3]
                assert (row["name"], row["tier"], row["credit"]) == (
                    f"user-{k}",
                    tier,
                    (k % 1000) / 10,
                )
            else:
                assert row["name"] is None
        loaded = stats(source)
        assert (loaded.loads, loaded.rows) == (1, MILLION)
        assert loaded.memory > 0
    finally:
        run_sync(source.aclose, timeout=30)
        store.server.sql("DROP TABLE million")


def test_a_load_past_load_timeout_fails_in_one_line_naming_the_store_and_the_bound(
    store: Store,
) -> None:
    slow_full = (
        "SELECT id, name FROM users, pg_sleep(5)"
        if store.name == "postgres"
        else "SELECT id, name FROM users WHERE SLEEP(5) = 0"
    )
    users = store.lookup(
        store.url,
        query=f"SELECT id, name FROM users WHERE id {store.in_keys}",
        full_query=slow_full,
        key="id",
        schema="name string",
    )
    cache = FullCache(load_timeout=0.5)
    with pytest.raises(LoadTimedOut) as raised:
        list(lookup_rows([{"user_id": 1}], users, on="user_id", cache=cache))
    message = str(raised.value)
    assert "\n" not in message
    assert "load_timeout=0.5s" in message and store.name in message
    assert store.server.password not in message
    run_sync(FullCacheSource(users, cache).aclose, timeout=30)
