"""The full cache of a PostgreSQL table: loaded whole by one ordered cursor (1:N keys kept
together across pages), answered from memory, and served while the database is down."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.postgres import PostgresLookup
from enrich import FullCache, FullCacheSource
from enrich.demo.postgres_server import PostgresServer
from enrich.engine.runtime import run_sync
from enrich.testing import FakeClock

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


def test_whole_table_loaded_by_pages_with_one_to_many_keys_whole(
    postgres_server: PostgresServer,
) -> None:
    postgres_server.sql(
        "DROP TABLE IF EXISTS items; CREATE TABLE items (owner int, item text);"
        # owner 7 has 25 rows: more than a page of 10, so its rows span pages
        "INSERT INTO items SELECT i, 'i' || i FROM generate_series(1, 95) i;"
        "INSERT INTO items SELECT 7, 'extra' || i FROM generate_series(1, 24) i;"
    )
    items = PostgresLookup(postgres_server.url, table="items", key="owner", schema="item string")
    source = FullCacheSource(items, FullCache(page_rows=10), clock=FakeClock())
    try:
        found = lookup(source, [1, 7, 95, 96])
        assert found[1] == ("i1",) and found[95] == ("i95",) and found[96] is None
        assert sorted(found[7]) == sorted([("i7",)] + [(f"extra{i}",) for i in range(1, 25)])
        assert stats(source).rows == 95
    finally:
        run_sync(source.aclose, timeout=10)


def test_the_snapshot_serves_while_the_database_is_down_and_reloads_after(
    restartable_postgres: PostgresServer,
) -> None:
    server = restartable_postgres
    server.sql(
        "CREATE TABLE users (id bigint PRIMARY KEY, name text, version int);"
        "INSERT INTO users SELECT i, 'u' || i, 1 FROM generate_series(0, 49) i"
    )
    clock = FakeClock()
    users = PostgresLookup(
        server.url, table="users", key="id", schema="name string, version int", timeout=2
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
        server.sql("UPDATE users SET version = 2")
        clock.advance(FullCache().retry_delay)  # the retry is due
        wait_load(source)
        assert lookup(source, [4])[4] == ("u4", 2)
        assert stats(source).loads == 2
    finally:
        run_sync(source.aclose, timeout=10)


@pytest.mark.parametrize(
    ("ddl", "schema"),
    [
        # a unique key and plain types: read by COPY ... (FORMAT csv)
        (
            "id bigint PRIMARY KEY, name text, score double precision, ok boolean, day date, "
            "n integer",
            "name string, score double, ok boolean, day date, n int",
        ),
        # a unique text key, a timestamp: the records' columns zipped back into rows
        ("id text PRIMARY KEY, name text, at timestamptz", "name string, at timestamp"),
        # no unique index: ordered by key, a key's rows grouped
        ("id bigint, name text, score numeric(6,2)", "name string, score decimal(6,2)"),
    ],
)
def test_every_load_path_answers_what_a_live_lookup_answers(
    postgres_server: PostgresServer, ddl: str, schema: str
) -> None:
    text_key = ddl.startswith("id text")
    key_sql = "i::text" if text_key else "i"
    postgres_server.sql(
        f"DROP TABLE IF EXISTS dim; CREATE TABLE dim ({ddl});"
        f"INSERT INTO dim (id, name) SELECT {key_sql}, CASE i % 4 WHEN 0 THEN NULL "
        "WHEN 1 THEN '' WHEN 2 THEN 'a,\"b\nc' ELSE 'n' || i END FROM generate_series(1, 40) i;"
    )
    if "score double" in ddl:
        postgres_server.sql(
            "UPDATE dim SET score = CASE id % 5 WHEN 0 THEN 'NaN' WHEN 1 THEN '-Infinity' "
            "WHEN 2 THEN 0.1 + id ELSE NULL END, ok = id % 2 = 0, "
            "day = date '2024-01-01' + id::int, n = CASE WHEN id % 3 = 0 THEN NULL ELSE -id END"
        )
    if "at timestamptz" in ddl:
        postgres_server.sql(
            "UPDATE dim SET at = timestamptz '2024-05-01 10:00+02' + id::int * interval '1 s'"
        )
    if "numeric" in ddl:
        postgres_server.sql("INSERT INTO dim SELECT id, name || '!', 1.25 FROM dim WHERE id < 5")
    keys = [str(i) if text_key else i for i in range(0, 42)]
    live = PostgresLookup(postgres_server.url, table="dim", key="id", schema=schema)
    source = FullCacheSource(
        PostgresLookup(postgres_server.url, table="dim", key="id", schema=schema),
        FullCache(page_rows=7),
        clock=FakeClock(),
    )
    try:
        cached = lookup(source, keys)
        asked = lookup(live, keys)
        run_sync(live.aclose, timeout=10)

        def same(a: Any) -> Any:
            return sorted(a, key=repr) if isinstance(a, list) else repr(a)  # NaN == NaN

        assert {k: same(v) for k, v in cached.items()} == {k: same(v) for k, v in asked.items()}
    finally:
        run_sync(source.aclose, timeout=10)
