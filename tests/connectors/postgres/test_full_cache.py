"""The full cache of a PostgreSQL table by each of its load paths (COPY as CSV, column
records, an ordered cursor) answers what a live lookup answers. What the full cache does
on every relational server is ``tests/connectors/sql/test_full_cache.py``'s."""

from __future__ import annotations

import math
from typing import Any

import pytest

from connectors.postgres import PostgresLookup
from enrich import FullCache, FullCacheSource
from enrich.demo.postgres_server import PostgresServer
from enrich.engine.runtime import run_sync
from enrich.testing import FakeClock
from tests.connectors.sql.test_full_cache import lookup

pytestmark = pytest.mark.timeout(90)


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
            # NaN == NaN; a timestamp equal by value (the snapshot's rows come from Arrow,
            # whose UTC is a ZoneInfo where the driver's is datetime.timezone.utc)
            if isinstance(a, list):
                return sorted((same(row) for row in a), key=repr)
            if isinstance(a, tuple):
                return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in a)
            return repr(a)

        assert {k: same(v) for k, v in cached.items()} == {k: same(v) for k, v in asked.items()}
    finally:
        run_sync(source.aclose, timeout=10)
