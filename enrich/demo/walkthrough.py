"""The first two parts of ``enrich demo``: the operator's figures, then lookup joins.

Both run without Spark: part 1 against a simulated store, part 2 against the demo's
Redis and HTTP dimension service (see :func:`enrich.demo.local.demo_services`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

import enrich

from ..engine.runtime import run_sync
from ..lookup.iterators import dict_rows, lookup_chunks
from .local import BROKEN_USER, DEMO_USERS
from .postgres_store import users_store

LATENCY = 0.005  # seconds: a remote store on a good network


def _rate(count: int, started: float) -> float:
    return count / max(time.perf_counter() - started, 1e-9)


def _progress(text: str) -> None:
    # So that a measurement in progress is never silent; on a terminal the next line
    # overwrites it.
    if sys.stdout.isatty():
        print(f"   ... {text}".ljust(76), end="\r", flush=True)
    else:
        print(f"   ... {text}", flush=True)


def operator_demo(records: int, capacity: int) -> None:
    """Sync calls vs ordered and unordered waits on a store answering in 5 ms."""
    print(
        f"1. The async wait operator: {records:,} records against a store taking "
        f"{LATENCY * 1e3:.0f} ms per call\n"
    )

    async def lookup(value: int) -> list[tuple[int, str]]:
        await asyncio.sleep(LATENCY)
        return [(value, f"dim-{value}")]

    sync_count = max(records // 20, 1)
    _progress(f"measuring {sync_count:,} calls one at a time (~{sync_count * LATENCY:.0f} s)")
    started = time.perf_counter()
    for _ in range(sync_count):
        time.sleep(LATENCY)  # what a row-at-a-time UDF does: wait on every call
    sync_rate = _rate(sync_count, started)
    rows: list[tuple[str, float]] = [("one call at a time (a plain UDF)", sync_rate)]
    for label, wait in (
        ("ordered_wait", enrich.ordered_wait),
        ("unordered_wait", enrich.unordered_wait),
    ):
        _progress(f"measuring {label} on {records:,} records")
        started = time.perf_counter()
        count = sum(1 for _ in wait(range(records), lookup, capacity=capacity, timeout=2.0))
        rows.append((f"{label}, capacity {capacity}", _rate(count, started)))
    if sys.stdout.isatty():
        print(" " * 76, end="\r")
    for label, rate in rows:
        print(f"   {label:<38} {rate:>10,.0f} records/s   {rate / sync_rate:>6.1f}x")
    bound = capacity / LATENCY
    label = "Little's law bound (capacity/latency)"
    print(f"   {label:<38} {bound:>10,.0f} records/s\n")


# Each order shows one case; the label says which.
ORDERS: list[tuple[str, dict[str, Any]]] = [
    ("hit", {"order_id": 1001, "user_id": 1, "amount": 25.0}),
    ("hit (cached)", {"order_id": 1002, "user_id": 1, "amount": 99.0}),
    ("miss: no such user", {"order_id": 1003, "user_id": DEMO_USERS + 7, "amount": 7.0}),
    ("null key: no lookup", {"order_id": 1004, "user_id": None, "amount": 3.0}),
    ("error policy: bad value", {"order_id": 1005, "user_id": BROKEN_USER, "amount": 42.0}),
]


def lookup_demo(redis_url: str, http_base: str, postgres_url: str | None = None) -> None:
    """A left join on Redis (error column policy), then one on HTTP; rows labelled.

    With ``postgres_url`` (``enrich demo --store postgres``), the users come from the
    PostgreSQL table of :mod:`enrich.demo.postgres_store` instead of Redis.
    """
    from connectors.http import HttpLookup

    store = "PostgreSQL" if postgres_url else "Redis"
    print(
        f"2. Lookup joins: orders enriched from {store} (users), then from HTTP (credit).\n"
        "   Left joins; a row whose lookup fails gets null fields and its reason in\n"
        "   enrich_error (on_error='error_column') instead of failing the job.\n"
    )
    users = users_store(redis_url, postgres_url)
    credit = HttpLookup(http_base + "/users/{}", schema="credit double")
    cache = enrich.LookupCache(max_rows=1_000, ttl=60)
    orders = [order for _, order in ORDERS]
    # The join logs each failed row at WARNING; here the table shows it instead.
    logging.getLogger("enrich.lookup").setLevel(logging.ERROR)
    # lookup_chunks rather than lookup_rows: its iterator hands out the join's metrics.
    first = lookup_chunks(
        [(orders, [o["user_id"] for o in orders])], users, cache=cache, on_error="error_column"
    )
    step1 = list(dict_rows(first, list(users.schema.names), "enrich_error"))
    step2 = enrich.lookup_rows(step1, credit, on="user_id", on_error="null")
    for (label, _), row in zip(ORDERS, list(step2), strict=True):
        if postgres_url and row["user_id"] == BROKEN_USER:
            label = "hit (a typed table)"  # no undecodable value to show in a table
        print(f"   {label:<24} {row}")
    print(f"\n   users metrics: {first.function.statistics().summary()}")
    for source in (users, credit):
        run_sync(source.aclose)  # close this process's pools before the services stop
    print()
