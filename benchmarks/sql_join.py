"""The SQL join form against lookup_join, side by side, on the Spark benchmark's setup.

``SELECT * FROM users_join(TABLE(orders))`` (an Arrow UDTF, see
``enrich.spark.sql.join_table``) and ``lookup_join(orders, users, on="user_id")`` on the same
cached input (``local[2]``, uniform keys over the benchmark's users, Redis on loopback,
noop sink), alternating, best of ``REPEAT`` each; also the struct-returning SQL function
(``dim_user(user_id)``) for reference.

Run: ``python -m benchmarks sql_join`` (writes benchmarks/results/sql_join.md).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from connectors.redis import RedisLookup
from enrich.demo.local import local_redis

from ._report import table, write
from .lookup import load_users
from .spark import PARTITIONS, SCHEMA, orders, sink, start_spark

ROWS = int(os.environ.get("ENRICH_BENCH_SQL_JOIN_ROWS", 300_000))
REPEAT = int(os.environ.get("ENRICH_BENCH_SQL_JOIN_REPEAT", 5))


def main() -> None:
    from enrich.spark import lookup_join
    from enrich.spark.sql.join_table import register_lookup_join
    from enrich.spark.sql.lookup_udf import register_lookup

    with local_redis() as url:
        load_users(url)
        spark = start_spark()
        try:
            source = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
            df = orders(spark, ROWS, PARTITIONS, seed=7)
            df.createOrReplaceTempView("orders")
            register_lookup_join(
                spark, "users_join", source, input="orders", on="user_id", timeout=None
            )
            register_lookup(spark, "dim_user", source, timeout=None)
            paths: dict[str, Any] = {
                "lookup_join": lookup_join(
                    df, source, on="user_id", timeout=None, name="bench_join"
                ),
                "SQL: users_join(TABLE(orders))": spark.sql(
                    "SELECT * FROM users_join(TABLE(orders))"
                ),
                "SQL: dim_user(user_id) struct": spark.sql(
                    "SELECT o.*, u.name, u.tier, u.credit FROM "
                    "(SELECT *, dim_user(user_id) AS u FROM orders) o"
                ),
            }
            sink(paths["lookup_join"], ROWS)  # warm-up: workers, pools, JIT
            best = dict.fromkeys(paths, 0.0)
            paired: dict[str, list[float]] = {label: [] for label in paths}
            for _ in range(REPEAT):
                rates = {}
                for label, frame in paths.items():
                    start = time.perf_counter()
                    sink(frame, ROWS)
                    rates[label] = ROWS / (time.perf_counter() - start)
                    best[label] = max(best[label], rates[label])
                for label, rate in rates.items():  # against lookup_join of the same round
                    paired[label].append(rate / rates["lookup_join"])
                print({k: round(v) for k, v in rates.items()}, flush=True)
        finally:
            spark.stop()
    reference = best["lookup_join"]
    rows = [
        (label, rate, rate / reference, statistics.median(paired[label]), min(paired[label]))
        for label, rate in best.items()
    ]
    headers = [
        "path",
        "best rows/s",
        "best / lookup_join's best",
        "median of the rounds' ratios",
        "lowest round ratio",
    ]
    conditions = (
        f"{ROWS:,} rows, {PARTITIONS} partitions, local[{PARTITIONS}], uniform keys, Redis "
        f"on loopback, noop sink; {REPEAT} rounds, each running every path once in turn, on "
        "a shared (contended) machine; a round's ratio compares runs made seconds apart."
    )
    write(
        "sql_join",
        "The SQL join form against lookup_join",
        [("Redis on loopback", table(headers, rows))],
        notes=conditions,
    )


if __name__ == "__main__":
    main()
