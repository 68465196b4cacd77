"""MySQL/MariaDB lookups side by side, on ``local[2]`` against a MariaDB table on loopback.

Paths, each reading the same cached DataFrame of ``ROWS`` orders (``user_id`` uniform over
the table's ``TABLE_ROWS`` ids, 2 partitions) into Spark's ``noop`` sink:

* ``lookup_join`` on its defaults (``MySqlLookup``, no cache);
* (b) a hand-written ``mapInPandas``: one ``SELECT ... WHERE id IN (...)`` per Arrow batch
  (its distinct keys) over one PyMySQL connection per worker, a pandas merge;
* (a) a per-row UDF: one PyMySQL ``SELECT ... WHERE id = %s`` per row on one connection
  per worker (``UDF_ROWS`` rows: its rate is what matters);
* (c) an Arrow passthrough, the floor of any Python stage.

And the full cache: one load of the whole table by ``FullCacheSource.reload`` against a
plain ``SELECT`` of the same rows streamed by PyMySQL's unbuffered cursor and thrown away.

Run: ``python -m benchmarks mysql`` (writes benchmarks/results/mysql.md). Sizes:
``ENRICH_BENCH_MYSQL_TABLE`` (200,000), ``ENRICH_BENCH_MYSQL_ROWS`` (500,000). The server
is the tests' MariaDB (tests/support/mysql_server.py: Debian's mariadb-server).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from connectors.mysql import MySqlLookup
from enrich import FullCache, FullCacheSource
from enrich.engine.runtime import run_sync
from tests.support.mysql_server import MySqlServer

from ._report import best_rate, table, write
from .spark import PARTITIONS, passthrough, start_spark

TABLE_ROWS = int(os.environ.get("ENRICH_BENCH_MYSQL_TABLE", 200_000))
ROWS = int(os.environ.get("ENRICH_BENCH_MYSQL_ROWS", 500_000))
UDF_ROWS = min(ROWS, 10_000)
ROUNDS = 2
SCHEMA = "name string, tier string, credit double"
SELECT = "SELECT id, name, tier, credit FROM users"

# -- the executor side of the hand-written paths (module level: workers import them) ----

_connections: dict[tuple[int, str], Any] = {}


def _connection(options: dict[str, Any]) -> Any:
    import pymysql

    key = (os.getpid(), repr(sorted(options.items())))
    if key not in _connections:
        _connections[key] = pymysql.connect(**options, autocommit=True)
    return _connections[key]


def in_per_batch(options: dict[str, Any]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """(b) The mapInPandas body: one ``IN (...)`` per batch over one connection."""

    def enrich_frames(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        conn = _connection(options)
        for frame in frames:
            keys = frame["user_id"].dropna().unique().tolist()
            with conn.cursor() as cursor:
                cursor.execute(f"{SELECT} WHERE id IN %s", (keys,))
                records = cursor.fetchall()
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


def orders(spark: Any, rows: int, seed: int) -> Any:
    from pyspark.sql import functions as F

    df = spark.range(rows, numPartitions=PARTITIONS).select(
        F.col("id").alias("order_id"),
        (F.rand(seed) * TABLE_ROWS).cast("bigint").alias("user_id"),
    )
    df = df.cache()
    df.count()
    return df


def sink(df: Any, rows: int) -> int:
    df.write.format("noop").mode("overwrite").save()
    return rows


def join_paths(spark: Any, server: MySqlServer) -> tuple[str, dict[str, float]]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from enrich.spark import lookup_join

    options = {
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "password": server.password,
        "database": server.database,
    }
    source = MySqlLookup(server.url, table="users", key="id", schema=SCHEMA)
    df = orders(spark, ROWS, seed=7)
    small = orders(spark, UDF_ROWS, seed=8)
    sink(lookup_join(small, source, on="user_id", name="my_warm_up"), UDF_ROWS)  # pools
    enriched = StructType([*df.schema.fields, *StructType.fromDDL(SCHEMA).fields])
    udf = F.udf(get_per_row(options), "struct<name: string, tier: string, credit: double>")
    paths: list[tuple[str, Any, int]] = [
        ("lookup_join, defaults", lookup_join(df, source, on="user_id", name="my_bench"), ROWS),
        (
            "(b) mapInPandas, one IN (...) per batch, one PyMySQL connection",
            df.mapInPandas(in_per_batch(options), enriched),
            ROWS,
        ),
        (
            f"(a) Python UDF, one PyMySQL SELECT per row ({UDF_ROWS:,} rows)",
            small.select("*", udf("user_id").alias("u")),
            UDF_ROWS,
        ),
        ("(c) mapInArrow passthrough, no lookup", df.mapInArrow(passthrough, df.schema), ROWS),
    ]
    rates = dict.fromkeys((label for label, *_ in paths), 0.0)
    for round_ in range(ROUNDS):  # rounds, not repeats: a burst of load spoils one run only
        for label, frame, rows in paths:
            rate = best_rate(partial(sink, frame, rows), repeat=1)
            rates[label] = max(rates[label], rate)
            print(f"  round {round_ + 1}, {label}: {rate:,.0f} rows/s", flush=True)
    df.unpersist()
    small.unpersist()
    a = next(v for k, v in rates.items() if k.startswith("(a)"))
    b = next(v for k, v in rates.items() if k.startswith("(b)"))
    rows = [[label, r, r / a, r / b] for label, r in rates.items()]
    main = rates["lookup_join, defaults"]
    return table(["path", "rows/s", "vs (a)", "vs (b)"], rows), {"main": main, "a": a, "b": b}


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


def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="enrich-bench-mysql-") as folder:
        server = MySqlServer(Path(folder)).start()
        try:
            fill(server)
            print(f"MariaDB: users of {TABLE_ROWS:,} rows on port {server.port}", flush=True)
            full_text, _ = full_cache(server)
            spark = start_spark()
            try:
                joins_text, _ = join_paths(spark, server)
            finally:
                spark.stop()
        finally:
            server.stop()
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


if __name__ == "__main__":
    main()
