"""A latency tail, unordered: per-key hand-over against Flink's per-record shape.

An HTTP dimension service where 1% of keys take 500 ms and the rest 5 ms, capacity 100,
UNORDERED, side by side in one run:
  (a) ``unordered_wait`` with one GET per record (Flink's shape: a record's slot is
      freed as soon as its own answer is in);
  (b) ``lookup_rows(..., mode="unordered")`` with ``HttpLookup``'s per-key GETs: rows
      are batched into chunks, and each answered row leaves and frees its slot at once.
Target: (b) >= 0.8 of (a).
"""

from __future__ import annotations

import os
import random
from typing import Any

import aiohttp

import enrich
from connectors.http import HttpLookup
from enrich.demo.local import dimension_service

from ._report import best_rate, table, write

CAPACITY = 100
FAST, SLOW, SLOW_EVERY = 0.005, 0.5, 100
COUNT = int(os.environ.get("ENRICH_BENCH_TAIL", 4000))
SCHEMA = "name string, tier string, credit double"


def keys_with_tail(count: int, seed: int) -> list[int]:
    """Random user ids; about one in ``SLOW_EVERY`` is slow (divisible by it)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        uid = rng.randrange(1, 100_000)
        if rng.random() < 1 / SLOW_EVERY:
            uid = uid - uid % SLOW_EVERY or SLOW_EVERY
        elif uid % SLOW_EVERY == 0:
            uid += 1
        out.append(uid)
    return out


class PerRecordGet(enrich.AsyncFunction):
    """One GET per record on a session opened on the loop (what users write by hand)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session: aiohttp.ClientSession | None = None

    def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=CAPACITY)
        self.session = aiohttp.ClientSession(connector=connector)

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def invoke(self, uid: int) -> list[Any]:
        assert self.session is not None
        async with self.session.get(f"{self.base}/users/{uid}") as response:
            doc = await response.json()
        return [(doc["name"], doc["tier"], doc["credit"])]


def per_record(base: str, keys: list[int]) -> int:
    outputs = enrich.unordered_wait(keys, PerRecordGet(base), capacity=CAPACITY, timeout=None)
    return sum(1 for _ in outputs)


def through_lookup_rows(source: HttpLookup, keys: list[int]) -> int:
    rows = ({"uid": uid} for uid in keys)
    out = enrich.lookup_rows(
        rows, source, on="uid", mode="unordered", capacity=CAPACITY, timeout=None
    )
    return sum(1 for _ in out)


def main() -> None:
    keys = keys_with_tail(COUNT, seed=5)
    slow = sum(1 for k in keys if k % SLOW_EVERY == 0)
    with dimension_service(latency=FAST, slow_every=SLOW_EVERY, slow_latency=SLOW) as base:
        source = HttpLookup(base + "/users/{}", schema=SCHEMA, max_connections=CAPACITY)
        per_record(base, keys[:200])  # warm up both paths
        through_lookup_rows(source, keys[:200])
        a = best_rate(lambda: per_record(base, keys), repeat=2)
        b = best_rate(lambda: through_lookup_rows(source, keys), repeat=2)
        bound = CAPACITY / (FAST * (1 - slow / COUNT) + SLOW * slow / COUNT)
        rows = [
            ["(a) unordered_wait, one GET per record", a, a / bound, 1.0],
            ['(b) lookup_rows(mode="unordered"), HttpLookup per-key', b, b / bound, b / a],
        ]
        section = table(["path", "rows/s", "fraction of Little's law", "vs (a)"], rows)
    path = write(
        "tail",
        "A latency tail, unordered",
        [
            (
                f"HTTP, {COUNT:,} rows, {slow} slow (500 ms), the rest 5 ms; capacity "
                f"{CAPACITY}; Little's law bound {bound:,.0f} rows/s",
                section,
            )
        ],
        notes="Rerun: `./scripts/dev bench tail` (ENRICH_BENCH_TAIL=N rows).",
    )
    print(f"written to {path}")
