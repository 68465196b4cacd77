"""PostgreSQL lookups side by side, on ``local[2]`` against a 1M-row table on loopback.

Paths, each reading the same cached DataFrame of ``ROWS`` orders (``user_id`` uniform over
the table's ``TABLE_ROWS`` ids, 2 partitions) into Spark's ``noop`` sink:

* ``lookup_join`` on its defaults (``PostgresLookup``, no cache);
* (b) a hand-written ``mapInPandas``: one ``SELECT ... WHERE id = ANY($1)`` per Arrow batch
  over one asyncpg connection per worker (the batch's distinct keys, a pandas merge);
* (a) a per-row UDF: one psycopg ``SELECT ... WHERE id = %s`` per row on one connection
  per worker (``UDF_ROWS`` rows: its rate is what matters).

And the full cache: one load of the whole table by ``FullCacheSource.reload`` (the
cursor, the grouping, the snapshot's Arrow struct) against a plain ``COPY (SELECT ...)
TO STDOUT`` of the same rows read by asyncpg and thrown away; the process's RSS growth
for the snapshot.

And, apart (``python -m benchmarks.postgres jdbc``), the reference a Spark user reaches for
first: the table read once by Spark's own JDBC source (``spark.read.format("jdbc")``,
cached) and broadcast-joined to the same orders, a stream-static join. Its rows/s beside
``lookup_join``'s, and its freshness: a row updated after the read, then both joins asked
for it. Needs the driver jar of ``scripts/jdbc/fetch``; the section it measures is
appended to (or replaces its earlier copy in) benchmarks/results/postgres.md.

Run: ``python -m benchmarks postgres`` (writes benchmarks/results/postgres.md), or the joins
alone: ``python -m benchmarks.postgres joins`` (benchmarks/results/postgres_joins.md;
``lookup_join`` on its defaults first, then on its former defaults, each figure the median
of three interleaved rounds with its load). Sizes: ``ENRICH_BENCH_PG_TABLE`` (1,000,000),
``ENRICH_BENCH_PG_ROWS`` (200,000).
"""

from __future__ import annotations

import asyncio
import glob
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from connectors.postgres import PostgresLookup
from enrich import FullCache, FullCacheSource
from enrich.demo.postgres_server import PostgresServer
from enrich.engine.runtime import run_sync

from ._report import RESULTS, best_rate, table, write
from ._sql_paths import JOIN_ROUNDS, SCHEMA, SELECT, orders, race_joins, write_joins
from .spark import PARTITIONS, sink, start_spark

TABLE_ROWS = int(os.environ.get("ENRICH_BENCH_PG_TABLE", 1_000_000))
ROWS = int(os.environ.get("ENRICH_BENCH_PG_ROWS", 200_000))
UDF_ROWS = min(ROWS, 20_000)
ROUNDS = 2
# The join's defaults before sources advertised their own bound: Spark's 131072 rows per
# task, 8 connections, 1,000 keys per statement.
FORMER = "lookup_join, former defaults (capacity 131072, pool_size 8, max_batch 1000)"

# -- the executor side of the hand-written paths (module level: workers import them) ----

_loops: dict[int, Any] = {}
_connections: dict[tuple[int, str], Any] = {}


def _asyncpg(url: str) -> tuple[asyncio.AbstractEventLoop, Any]:
    import asyncpg

    pid = os.getpid()
    loop = _loops.get(pid)
    if loop is None:
        loop = _loops[pid] = asyncio.new_event_loop()
    key = (pid, url)
    if key not in _connections:
        _connections[key] = loop.run_until_complete(asyncpg.connect(url))
    return loop, _connections[key]


def any_per_batch(url: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """(b) The mapInPandas body: one ``= ANY($1)`` per batch over one connection."""

    def enrich_frames(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        loop, conn = _asyncpg(url)
        for frame in frames:
            keys = frame["user_id"].dropna().unique().tolist()
            records = loop.run_until_complete(conn.fetch(f"{SELECT} WHERE id = ANY($1)", keys))
            found = pd.DataFrame(
                [tuple(r) for r in records], columns=["user_id", "name", "tier", "credit"]
            )
            yield frame.merge(found, on="user_id", how="left")

    return enrich_frames


_psycopg: dict[tuple[int, str], Any] = {}


def get_per_row(url: str) -> Callable[[int], Any]:
    """(a) The UDF body: one psycopg SELECT per row."""

    def lookup(user_id: int) -> Any:
        import psycopg

        key = (os.getpid(), url)
        conn = _psycopg.get(key)
        if conn is None:
            conn = _psycopg[key] = psycopg.connect(url, autocommit=True)
        row = conn.execute("SELECT name, tier, credit FROM users WHERE id = %s", (user_id,))
        return row.fetchone()

    return lookup


# -- the driver --------------------------------------------------------------------------


def fill(server: PostgresServer) -> None:
    server.sql(
        "DROP TABLE IF EXISTS users;"
        "CREATE TABLE users (id bigint PRIMARY KEY, name text, tier text, credit double precision);"
        f"INSERT INTO users SELECT i, 'user-' || i, (ARRAY['gold','silver','bronze'])[1 + i % 3],"
        f" (i % 1000) / 10.0 FROM generate_series(0, {TABLE_ROWS - 1}) i;"
    )
    server.sql("VACUUM ANALYZE users")


def join_paths(spark: Any, url: str) -> tuple[str, dict[str, float]]:
    return race_joins(
        spark,
        PostgresLookup(url, table="users", key="id", schema=SCHEMA),
        name="pg",
        rows=ROWS,
        udf_rows=UDF_ROWS,
        table_rows=TABLE_ROWS,
        rounds=JOIN_ROUNDS,
        former=(
            FORMER,
            PostgresLookup(
                url, table="users", key="id", schema=SCHEMA, pool_size=8, max_batch=1000
            ),
            131072,
        ),
        per_batch=(
            "(b) mapInPandas, one = ANY($1) per batch, one asyncpg connection",
            any_per_batch(url),
        ),
        per_row=(
            f"(a) Python UDF, one psycopg SELECT per row ({UDF_ROWS:,} rows)",
            get_per_row(url),
        ),
    )


async def _copy(url: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    size = 0

    async def count(chunk: bytes) -> None:
        nonlocal size
        size += len(chunk)

    try:
        await conn.copy_from_query(SELECT, output=count)
    finally:
        await conn.close()
    return size


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def _scan(url: str) -> int:
    """The connector's part of a load alone: every page read, nothing kept."""
    source = PostgresLookup(url, table="users", key="id", schema=SCHEMA, timeout=60)
    rows = 0
    try:
        async for page, _ in source.scan_dimension(10_000):
            rows += len(page)
    finally:
        await source.aclose()
    return rows


def full_cache(url: str) -> tuple[str, dict[str, float]]:
    copy_best, load_best, scan_best, grown = float("inf"), float("inf"), float("inf"), 0.0
    for _ in range(ROUNDS):
        started = time.perf_counter()
        size = run_sync(lambda: _copy(url), timeout=600)
        copy_best = min(copy_best, time.perf_counter() - started)
        started = time.perf_counter()
        run_sync(lambda: _scan(url), timeout=600)
        scan_best = min(scan_best, time.perf_counter() - started)
        source = FullCacheSource(
            PostgresLookup(url, table="users", key="id", schema=SCHEMA, timeout=60),
            FullCache(page_rows=10_000, max_rows=2 * TABLE_ROWS),
        )
        before = _rss_mb()
        started = time.perf_counter()
        run_sync(source.reload, timeout=600)
        load_best = min(load_best, time.perf_counter() - started)
        grown = max(grown, _rss_mb() - before)
        run_sync(source.aclose, timeout=60)
        print(
            f"  COPY {copy_best:.2f}s, scan {scan_best:.2f}s, full cache load {load_best:.2f}s",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [
        [f"COPY ({SELECT}) TO STDOUT, read by asyncpg ({size / 2**20:.0f} MiB)", copy_best, 1.0],
        [
            "PostgresLookup.scan_dimension alone (the connector's part: COPY as CSV, "
            "Arrow's reader, the pages' dicts of tuples)",
            scan_best,
            scan_best / copy_best,
        ],
        [
            "FullCacheSource.reload (the scan + the engine's snapshot: the answers' dict, "
            "the struct array, the positions)",
            load_best,
            load_best / copy_best,
        ],
    ]
    text = table(["what", "seconds (best)", "vs COPY"], rows)
    text += f"\n\nRSS growth for one snapshot: {grown:,.0f} MiB (process peak {peak:,.0f} MiB)."
    return text, {"load": load_best, "copy": copy_best, "scan": scan_best}


def main() -> None:
    started = time.perf_counter()
    with PostgresServer() as server:
        fill(server)
        print(f"PostgreSQL: users of {TABLE_ROWS:,} rows on {server!r}", flush=True)
        full_text, full = full_cache(server.url)
        spark = start_spark()
        try:
            joins_text, rates = join_paths(spark, server.url)
        finally:
            spark.stop()
    checks = [
        *join_checks(rates),
        ["FullCache load vs COPY TO STDOUT", full["load"] / full["copy"], "<= 2x"],
        ["its scan alone vs COPY TO STDOUT", full["scan"] / full["copy"], "-"],
    ]
    path = write(
        "postgres",
        "PostgreSQL lookups",
        [
            (
                f"Joins: {ROWS:,} orders over a {TABLE_ROWS:,}-row table, local[2], noop sink",
                joins_text,
            ),
            (f"Full cache of {TABLE_ROWS:,} rows", full_text),
            ("Against the targets", table(["ratio", "measured", "target"], checks)),
        ],
        notes=(
            f"Load average when the run ended: {os.getloadavg()[0]:.1f}. "
            f"Best of {ROUNDS} interleaved rounds. The server: Debian's PostgreSQL 15 started "
            "by enrich/demo/postgres_server.py on loopback (fsync off), on the same 2 cores "
            "as Spark."
        ),
    )
    print(f"written to {path} in {time.perf_counter() - started:.0f}s")


# -- the JDBC reference: Spark's own source, read once -----------------------------------

JDBC_HEADING = "Spark's JDBC source, read once (a stream-static join), beside lookup_join"
FRESH_ID = 42  # the row updated after the read


def jdbc_jar() -> str:
    """The PostgreSQL JDBC driver jar scripts/jdbc/fetch put in the project's cache."""
    root = Path(__file__).resolve().parents[1]
    folder = os.environ.get("ENRICH_JDBC_JARS") or str(root / ".cache" / "jdbc")
    jars = sorted(glob.glob(os.path.join(folder, "postgresql-*.jar")))
    if not jars:
        raise SystemExit(f"no PostgreSQL JDBC driver in {folder}: run scripts/jdbc/fetch")
    return jars[-1]


def jdbc_static(spark: Any, server: PostgresServer) -> str:
    """Rates of the broadcast join to the JDBC snapshot and of lookup_join; then freshness."""
    from pyspark.sql import functions as F

    from enrich.spark import lookup_join

    started = time.perf_counter()
    snapshot = (
        spark.read.format("jdbc")
        .option("url", f"jdbc:postgresql://127.0.0.1:{server.port}/{server.database}")
        .option("user", server.user)
        .option("password", server.password)
        .option("driver", "org.postgresql.Driver")
        .option("dbtable", "users")
        .option("partitionColumn", "id")
        .option("lowerBound", 0)
        .option("upperBound", TABLE_ROWS)
        .option("numPartitions", PARTITIONS)
        .option("fetchsize", 10_000)
        .load()
        .cache()
    )
    snapshot.count()  # the one read; the join below never goes back to the database
    read_seconds = time.perf_counter() - started
    source = PostgresLookup(server.url, table="users", key="id", schema=SCHEMA)
    df = orders(spark, ROWS, 7, TABLE_ROWS)
    static = df.join(F.broadcast(snapshot), df.user_id == snapshot.id, "left").drop("id")
    joined = lookup_join(df, source, on="user_id", name="pg_bench")
    sink(joined.limit(1000), 1000)  # warm-up: pools, workers
    paths = [
        ("lookup_join, defaults (no cache)", joined),
        ("JDBC snapshot, broadcast join", static),
    ]
    rates = dict.fromkeys((label for label, _ in paths), 0.0)
    for round_ in range(ROUNDS):
        for label, frame in paths:
            rate = best_rate(partial(sink, frame, ROWS), repeat=1)
            rates[label] = max(rates[label], rate)
            print(f"  round {round_ + 1}, {label}: {rate:,.0f} rows/s", flush=True)
    df.unpersist()
    # Freshness: the row changes after the read; each join is asked for it again.
    server.sql(f"UPDATE users SET name = 'renamed-after-the-read' WHERE id = {FRESH_ID}")
    one = spark.createDataFrame([(1, FRESH_ID)], "order_id long, user_id long")
    seen_static = one.join(F.broadcast(snapshot), one.user_id == snapshot.id).first()["name"]
    seen_lookup = lookup_join(one, source, on="user_id").first()["name"]
    snapshot.unpersist()
    rows = [[label, rate, rate / rates[paths[0][0]]] for label, rate in rates.items()]
    text = table(["path", "rows/s", "vs lookup_join"], rows)
    text += (
        f"\n\nThe JDBC read of {TABLE_ROWS:,} rows into the cached snapshot: {read_seconds:.1f} s "
        f"(not in its rate).\n\nFreshness: `UPDATE users SET name = 'renamed-after-the-read' "
        f"WHERE id = {FRESH_ID}` after the read; then the JDBC snapshot's join returns "
        f"`{seen_static}`, lookup_join (no cache) returns `{seen_lookup}`."
    )
    return text


def main_jdbc() -> None:
    started = time.perf_counter()
    with PostgresServer() as server:
        fill(server)
        spark = start_spark(spark__jars=jdbc_jar())
        try:
            text = jdbc_static(spark, server)
        finally:
            spark.stop()
    load = os.popen("uptime").read().strip()
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    section = (
        f"## {JDBC_HEADING}\n\nMeasured {when} UTC, {ROWS:,} orders over a {TABLE_ROWS:,}-row "
        f"table, local[2], noop sink, best of {ROUNDS} interleaved rounds; `uptime` at the "
        f"end: {load}.\n\n{text}\n"
    )
    path = RESULTS / "postgres.md"
    earlier = path.read_text() if path.exists() else ""
    earlier = earlier.split(f"\n## {JDBC_HEADING}")[0].rstrip("\n")
    path.write_text(f"{earlier}\n\n\n{section}")
    print(section)
    print(f"appended to {path} in {time.perf_counter() - started:.0f}s")


def join_checks(rates: dict[str, float]) -> list[list[Any]]:
    """The joins' ratios against the targets."""
    return [
        ["lookup_join (defaults) vs (b) = ANY($1) per batch", rates["main"] / rates["b"], ">= 2x"],
        ["lookup_join (defaults) vs (a) per-row psycopg UDF", rates["main"] / rates["a"], ">= 30x"],
        ["lookup_join (defaults) vs its former defaults", rates["main"] / rates["former"], "-"],
    ]


def main_joins() -> None:
    """The joins alone (``python -m benchmarks.postgres joins``): results/postgres_joins.md."""
    with PostgresServer() as server:
        fill(server)
        print(f"PostgreSQL: users of {TABLE_ROWS:,} rows on {server!r}", flush=True)
        spark = start_spark()
        try:
            joins_text, rates = join_paths(spark, server.url)
        finally:
            spark.stop()
    write_joins(
        "postgres_joins",
        "PostgreSQL lookup joins",
        f"{ROWS:,} orders over a {TABLE_ROWS:,}-row table",
        joins_text,
        join_checks(rates),
        "Debian's PostgreSQL 15 started by enrich/demo/postgres_server.py (fsync off)",
    )


if __name__ == "__main__":
    modes = {"jdbc": main_jdbc, "joins": main_joins}
    modes[sys.argv[1]]() if sys.argv[1:] else main()
