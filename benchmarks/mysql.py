"""MySQL/MariaDB lookups side by side, on ``local[2]`` against a MariaDB table on loopback.

Paths, each reading the same cached DataFrame of ``ROWS`` orders (``user_id`` uniform over
the table's ``TABLE_ROWS`` ids, 2 partitions) into Spark's ``noop`` sink:

* ``lookup_join`` on its defaults (``MySqlLookup``, no cache);
* (b) a hand-written ``mapInPandas``: one ``SELECT ... WHERE id IN (...)`` per Arrow batch
  (its distinct keys) over one aiomysql connection per worker, a pandas merge;
* (a) a per-row UDF: one PyMySQL ``SELECT ... WHERE id = %s`` per row on one connection
  per worker (``UDF_ROWS`` rows: its rate is what matters);
* (c) an Arrow passthrough, the floor of any Python stage.

And the full cache: one load of the whole table by ``FullCacheSource.reload`` against a
plain ``SELECT`` of the same rows streamed by PyMySQL's unbuffered cursor and thrown away.

Run: ``python -m benchmarks mysql`` (writes benchmarks/results/mysql.md), or the joins
alone: ``python -m benchmarks.mysql joins`` (benchmarks/results/mysql_joins.md; medians of
three interleaved rounds, the defaults first, then the former defaults). Sizes:
``ENRICH_BENCH_MYSQL_TABLE`` (200,000), ``ENRICH_BENCH_MYSQL_ROWS`` (500,000). The server
is the tests' MariaDB (tests/support/mysql_server.py: Debian's mariadb-server).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from connectors.mysql import MySqlLookup
from enrich import FullCache, FullCacheSource
from enrich.engine.runtime import run_sync
from tests.support.mysql_server import MySqlServer

from ._report import table, write
from ._sql_paths import JOIN_ROUNDS, SCHEMA, SELECT, race_joins, write_joins
from .spark import start_spark

TABLE_ROWS = int(os.environ.get("ENRICH_BENCH_MYSQL_TABLE", 200_000))
ROWS = int(os.environ.get("ENRICH_BENCH_MYSQL_ROWS", 500_000))
UDF_ROWS = min(ROWS, 10_000)
ROUNDS = 2
# The join's defaults before sources advertised their own bound: Spark's 131072 rows per
# task, 8 connections, 500 keys per statement.
FORMER = "lookup_join, former defaults (capacity 131072, pool_size 8, max_batch 500)"

# -- the executor side of the hand-written paths (module level: workers import them) ----

_connections: dict[tuple[int, str], Any] = {}


def _connection(options: dict[str, Any]) -> Any:
    import pymysql

    key = (os.getpid(), repr(sorted(options.items())))
    if key not in _connections:
        _connections[key] = pymysql.connect(**options, autocommit=True)
    return _connections[key]


_loops: dict[int, asyncio.AbstractEventLoop] = {}
_async_connections: dict[tuple[int, str], Any] = {}


def _aiomysql(options: dict[str, Any]) -> tuple[asyncio.AbstractEventLoop, Any]:
    import aiomysql

    pid = os.getpid()
    loop = _loops.get(pid)
    if loop is None:
        loop = _loops[pid] = asyncio.new_event_loop()
    key = (pid, repr(sorted(options.items())))
    if key not in _async_connections:
        settings = {k: v for k, v in options.items() if k != "database"}
        opened = aiomysql.connect(**settings, db=options["database"], autocommit=True)
        conn = _async_connections[key] = loop.run_until_complete(opened)
        atexit.register(conn.close)  # before the loop's own finalizer closes the loop
    return loop, _async_connections[key]


def in_per_batch(options: dict[str, Any]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """(b) The mapInPandas body: one ``IN (...)`` per batch over one aiomysql connection."""

    async def fetch(conn: Any, keys: list[int]) -> Any:
        async with conn.cursor() as cursor:  # keys: ints of a bigint column, safe as text
            await cursor.execute(f"{SELECT} WHERE id IN ({','.join(map(str, keys))})")
            return await cursor.fetchall()

    def enrich_frames(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        loop, conn = _aiomysql(options)
        for frame in frames:
            keys = frame["user_id"].dropna().unique().tolist()
            records = loop.run_until_complete(fetch(conn, keys))
            found = pd.DataFrame(list(records), columns=["user_id", "name", "tier", "credit"])
            yield frame.merge(found, on="user_id", how="left")

    return enrich_frames


def get_per_row(options: dict[str, Any]) -> Callable[[int], Any]:
    """(a) The UDF body: one SELECT per row."""

    def lookup(user_id: int) -> Any:
        with _connection(options).cursor() as cursor:
            cursor.execute("SELECT name, tier, credit FROM users WHERE id = %s", (user_id,))
            return cursor.fetchone()

    return lookup


# -- the driver --------------------------------------------------------------------------


def fill(server: MySqlServer) -> None:
    server.sql(
        "DROP TABLE IF EXISTS users;"
        "CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT, tier TEXT, credit DOUBLE)"
    )
    tiers = ("gold", "silver", "bronze")
    step = 20_000
    for start in range(0, TABLE_ROWS, step):
        rows = [
            (i, f"user-{i}", tiers[i % 3], (i % 1000) / 10)
            for i in range(start, min(start + step, TABLE_ROWS))
        ]
        server.execute("INSERT INTO users VALUES (%s, %s, %s, %s)", rows, many=True)


def join_paths(spark: Any, server: MySqlServer) -> tuple[str, dict[str, float]]:
    options = {
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "password": server.password,
        "database": server.database,
    }
    return race_joins(
        spark,
        MySqlLookup(server.url, table="users", key="id", schema=SCHEMA),
        name="my",
        rows=ROWS,
        udf_rows=UDF_ROWS,
        table_rows=TABLE_ROWS,
        rounds=JOIN_ROUNDS,
        former=(
            FORMER,
            MySqlLookup(server.url, table="users", key="id", schema=SCHEMA, pool_size=8),
            131072,
        ),
        per_batch=(
            "(b) mapInPandas, one IN (...) per batch, one aiomysql connection",
            in_per_batch(options),
        ),
        per_row=(
            f"(a) Python UDF, one PyMySQL SELECT per row ({UDF_ROWS:,} rows)",
            get_per_row(options),
        ),
    )


def _plain_read(server: MySqlServer) -> int:
    import pymysql

    conn = server.connect(cursorclass=pymysql.cursors.SSCursor)
    count = 0
    try:
        with conn.cursor() as cursor:
            cursor.execute(SELECT)
            while page := cursor.fetchmany(10_000):
                count += len(page)
    finally:
        conn.close()
    return count


def full_cache(server: MySqlServer) -> tuple[str, dict[str, float]]:
    plain_best, load_best = float("inf"), float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        _plain_read(server)
        plain_best = min(plain_best, time.perf_counter() - started)
        source = FullCacheSource(
            MySqlLookup(server.url, table="users", key="id", schema=SCHEMA, timeout=60),
            FullCache(page_rows=10_000, max_rows=2 * TABLE_ROWS),
        )
        started = time.perf_counter()
        run_sync(source.reload, timeout=600)
        load_best = min(load_best, time.perf_counter() - started)
        run_sync(source.aclose, timeout=60)
        print(f"  plain read {plain_best:.2f}s, full cache load {load_best:.2f}s", flush=True)
    rows = [
        [f"{SELECT}, streamed by PyMySQL (SSCursor)", plain_best, 1.0],
        [
            "FullCache load (aiomysql SSCursor, grouping, snapshot)",
            load_best,
            load_best / plain_best,
        ],
    ]
    return table(["what", "seconds (best)", "vs plain read"], rows), {"load": load_best}


@contextmanager
def _mariadb() -> Iterator[MySqlServer]:
    """The tests' MariaDB in a folder of its own, its ``users`` filled, stopped after."""
    with tempfile.TemporaryDirectory(prefix="enrich-bench-mysql-") as folder:
        server = MySqlServer(Path(folder)).start()
        try:
            fill(server)
            print(f"MariaDB: users of {TABLE_ROWS:,} rows on port {server.port}", flush=True)
            yield server
        finally:
            server.stop()


def _joins(server: MySqlServer) -> tuple[str, dict[str, float]]:
    spark = start_spark()
    try:
        return join_paths(spark, server)
    finally:
        spark.stop()


def main() -> None:
    started = time.perf_counter()
    with _mariadb() as server:
        full_text, _ = full_cache(server)
        joins_text, _ = _joins(server)
    path = write(
        "mysql",
        "MySQL/MariaDB lookups",
        [
            (
                f"Joins: {ROWS:,} orders over a {TABLE_ROWS:,}-row table, local[2], noop sink",
                joins_text,
            ),
            (f"Full cache of {TABLE_ROWS:,} rows", full_text),
        ],
        notes=(
            f"Best of {ROUNDS} interleaved rounds. The server: Debian's MariaDB 10.11 started "
            "by tests/support/mysql_server.py on loopback, on the same 2 cores as Spark."
        ),
    )
    print(f"written to {path} in {time.perf_counter() - started:.0f}s")


def main_joins() -> None:
    """The joins alone (``python -m benchmarks.mysql joins``): results/mysql_joins.md."""
    with _mariadb() as server:
        joins_text, rates = _joins(server)
    checks = [
        ["lookup_join (defaults) vs (b) aiomysql IN (...)", rates["main"] / rates["b"], ">= 1.5x"],
        ["lookup_join (defaults) vs (a) per-row UDF", rates["main"] / rates["a"], "-"],
        ["lookup_join (defaults) vs its former defaults", rates["main"] / rates["former"], "-"],
    ]
    write_joins(
        "mysql_joins",
        "MySQL/MariaDB lookup joins",
        f"{ROWS:,} orders over a {TABLE_ROWS:,}-row table",
        joins_text,
        checks,
        "Debian's MariaDB 10.11 started by tests/support/mysql_server.py",
    )


if __name__ == "__main__":
    main_joins() if sys.argv[1:] == ["joins"] else main()
