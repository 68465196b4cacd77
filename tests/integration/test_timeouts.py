"""A row's timeout measures the store, against real stores: rows queued far longer than
the timeout behind the connector's own pool never time out; a call the store does not
answer still times its keys out with ``LookupTimeout``.

The Spark worker's path without a JVM (``enrich_batches``, Arrow batches of 10,000 rows)
at Spark's default capacity, 100,000 rows, ``timeout=1``. Each store answers a call in
50 ms; a pool of one connection makes the queue behind it ~10 s deep. Nothing races a
clock: a call's own time (50 ms) is far inside its timeout however busy the machine is,
and the queue is far longer than it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from connectors.mysql import MySqlLookup
from connectors.postgres import PostgresLookup
from enrich.demo.postgres_server import PostgresServer
from enrich.engine.runtime import run_sync
from enrich.lookup.join_settings import DEFAULT_SPARK_CAPACITY, JoinSettings
from enrich.spark.join.join_batches import JoinPlan, enrich_batches
from tests.integration.conftest import MakeHttp
from tests.support.http_server import BATCH_PATH, HttpTestServer
from tests.support.mysql_server import MySqlServer

pytestmark = pytest.mark.timeout(600)  # a hang guard only

ROWS = 100_000
USERS = 2_000  # distinct keys: 20 calls of 100 keys per 10,000-row batch


def batches() -> Iterator[pa.RecordBatch]:
    keys = [i % USERS for i in range(ROWS)]
    for start in range(0, ROWS, 10_000):
        yield pa.RecordBatch.from_pydict({"k": pa.array(keys[start : start + 10_000], pa.int64())})


def joined(source: Any, **settings: Any) -> list[dict[str, Any]]:
    options: dict[str, Any] = {
        "capacity": DEFAULT_SPARK_CAPACITY,
        "timeout": 1.0,
        "on_error": "error_column",
    }
    options.update(settings)
    plan = JoinPlan(
        name="timeouts",
        source=source,
        on=(0,),
        columns=tuple(source.schema.names),
        settings=JoinSettings(**options),
    )
    try:
        return [row for batch in enrich_batches(plan, batches()) for row in batch.to_pylist()]
    finally:
        run_sync(source.aclose, timeout=30)


def assert_all_enriched(rows: list[dict[str, Any]]) -> None:
    assert len(rows) == ROWS
    timed_out = [row for row in rows if row["enrich_error"] is not None]
    assert timed_out == []
    assert all(row["name"] == f"n{row['k']}" for row in rows)


def test_http_rows_queued_behind_the_pool_do_not_time_out(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.set_default_latency(0.05)
    for key in range(USERS):
        http_server.data[str(key)] = {"name": f"n{key}"}
    source = make_http(
        schema="name string", batch_url=http_server.url(BATCH_PATH), max_connections=1
    )

    assert_all_enriched(joined(source))


def test_http_a_call_the_store_never_answers_times_out_its_keys_alone(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.set_default_latency(0.05)
    for key in range(USERS):
        http_server.data[str(key)] = {"name": f"n{key}"}
    http_server.latency["7"] = 3600.0  # the batch holding key 7 never answers
    source = make_http(
        schema="name string", batch_url=http_server.url(BATCH_PATH), max_connections=1
    )

    # One lane call per POST (100 keys), so "the call" is the POST that hangs.
    rows = joined(source, max_batch=100)

    assert len(rows) == ROWS
    late = {row["k"] for row in rows if row["enrich_error"] is not None}
    assert late == set(range(100))  # key 7's POST: the first 100 distinct keys
    for row in rows:
        if row["k"] in late:
            assert row["name"] is None
            assert row["enrich_error"] == (
                f"timeout: record {row['k']} timed out after 1s (1 attempt(s))"
            )
        else:
            assert row["name"] == f"n{row['k']}" and row["enrich_error"] is None


def test_postgres_rows_queued_behind_the_pool_do_not_time_out(
    postgres_server: PostgresServer,
) -> None:
    postgres_server.sql(
        "DROP TABLE IF EXISTS slow_users; "
        "CREATE TABLE slow_users (id bigint PRIMARY KEY, name text); "
        f"INSERT INTO slow_users SELECT g, 'n' || g FROM generate_series(0, {USERS - 1}) g;"
    )
    source = PostgresLookup(
        postgres_server.url,
        # Each statement takes 50 ms on the server (pg_sleep runs once per statement).
        query="SELECT u.id, u.name FROM slow_users u, pg_sleep(0.05) WHERE u.id = ANY(:keys)",
        key="id",
        schema="name string",
        pool_size=1,
        max_batch=100,
    )

    assert_all_enriched(joined(source))


def test_mysql_rows_queued_behind_the_pool_do_not_time_out(mysql_server: MySqlServer) -> None:
    mysql_server.sql(
        "DROP TABLE IF EXISTS slow_users; "
        "CREATE TABLE slow_users (id BIGINT PRIMARY KEY, name VARCHAR(20));"
    )
    mysql_server.execute(
        "INSERT INTO slow_users VALUES (%s, %s)",
        [(key, f"n{key}") for key in range(USERS)],
        many=True,
    )
    source = MySqlLookup(
        mysql_server.url,
        # Each statement takes 50 ms on the server (the derived table sleeps once).
        query=(
            "SELECT u.id, u.name FROM slow_users u JOIN (SELECT SLEEP(0.05) AS s) d "
            "WHERE u.id IN (:keys)"
        ),
        key="id",
        schema="name string",
        pool_size=1,
        max_batch=100,
    )

    assert_all_enriched(joined(source))
