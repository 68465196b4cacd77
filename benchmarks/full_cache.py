"""The full cache, in one process (no Spark): its load, and its hot path.

* The load: ``FullCache()`` on its defaults loading a 1M-row PostgreSQL table
  (``FullCacheSource.reload``: pool, plan, ``COPY`` as CSV, Arrow's reader, the
  snapshot's columns and key index) beside a plain ``COPY users TO STDOUT`` read into
  memory by asyncpg, 3 interleaved rounds, medians, their ratio (the process's first
  round of each, with its one-time costs, reported apart); the snapshot's memory (its
  statistics' ``memory``, and the process's RSS growth).
* The hot path: the columnar lane over chunks of 10,000 keys answered by Redis (no
  cache), by a warm ``LookupCache``, and by a warm ``FullCache`` snapshot, side by side;
  the Redis snapshot's first load and its reloads, timed.

Run: ``python -m benchmarks full_cache`` (writes benchmarks/results/full_cache.md);
``ENRICH_BENCH_FULL_PARTS=load`` runs the load alone. Table size:
``ENRICH_BENCH_PG_TABLE`` (1,000,000).
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
from typing import Any

import pyarrow as pa

from connectors.postgres import PostgresLookup
from connectors.redis import RedisLookup
from enrich import FullCache, FullCacheSource, JoinMetrics, LookupCache
from enrich.demo.local import local_redis
from enrich.demo.postgres_server import PostgresServer
from enrich.engine.records.arrow_types import arrow_schema
from enrich.engine.runtime import run_sync
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane import ColumnarLane

from ._report import table, write
from ._sql_paths import SCHEMA as USERS_SCHEMA
from .lookup import KEYS, SCHEMA, load_users
from .postgres import TABLE_ROWS, fill

CHUNKS = int(os.environ.get("ENRICH_BENCH_FULL_CHUNKS", 100))
CHUNK = 10_000
ROUNDS = 3


def chunks(seed: int) -> list[pa.Array]:
    rng = random.Random(seed)
    return [
        pa.array([rng.randrange(KEYS) for _ in range(CHUNK)], pa.int64()) for _ in range(CHUNKS)
    ]


def rate(source: Any, cache: LookupCache | None, keys: list[pa.Array]) -> float:
    lane = ColumnarLane(
        source,
        pa.struct(list(arrow_schema(SCHEMA))),
        JoinSettings(
            how="left",
            on_error="fail",
            cache=cache,
            timeout=None,
            capacity=4 * CHUNK,
            max_batch=500,
        ),
        metrics=JoinMetrics(),
    )
    start = time.perf_counter()
    rows = sum(len(joined.structs) for joined in lane.run(enumerate(keys)))  # type: ignore[union-attr]
    return rows / (time.perf_counter() - start)


def main() -> None:
    parts = os.environ.get("ENRICH_BENCH_FULL_PARTS", "load,hot").split(",")
    sections: list[tuple[str, str]] = []
    notes: list[str] = []
    if "load" in parts:
        section, note = load_part()
        sections.append(section)
        notes.append(note)
    if "hot" in parts:
        section, note = hot_part()
        sections.append(section)
        notes.append(note)
    write("full_cache", "The full cache: its load and its hot path", sections, "\n\n".join(notes))


# -- the load ----------------------------------------------------------------------------


async def _copy(url: str) -> int:
    """A plain ``COPY users TO STDOUT``, its text kept in memory (as a user would)."""
    import asyncpg

    conn = await asyncpg.connect(url)
    chunks: list[bytes] = []

    async def keep(chunk: bytes) -> None:
        chunks.append(chunk)

    try:
        await conn.copy_from_table("users", output=keep)  # COPY users TO STDOUT
    finally:
        await conn.close()
    return sum(map(len, chunks))


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _load(url: str) -> tuple[float, Any, float]:
    """One load on FullCache's defaults: seconds, statistics, RSS growth (MiB)."""
    source = FullCacheSource(
        PostgresLookup(url, table="users", key="id", schema=USERS_SCHEMA), FullCache()
    )
    gc.collect()
    before = _rss_mib()
    started = time.perf_counter()
    run_sync(source.reload, timeout=900)
    seconds = time.perf_counter() - started
    grown = _rss_mib() - before
    stats = run_sync(_statistics(source), timeout=10)
    run_sync(source.aclose, timeout=60)
    if stats.loads != 1 or stats.rows != TABLE_ROWS:
        raise RuntimeError(f"the load did not hold the table: {stats}")
    return seconds, stats, grown


def load_part() -> tuple[tuple[str, str], str]:
    load_avg = os.getloadavg()
    copies: list[float] = []
    loads: list[float] = []
    with PostgresServer() as server:
        fill(server)
        # A process's first round pays one-time costs (imports, Arrow's and asyncio's
        # threads, first touches of memory): reported apart, not in the medians.
        started = time.perf_counter()
        run_sync(lambda: _copy(server.url), timeout=900)
        first_copy = time.perf_counter() - started
        first_load, _, grown = _load(server.url)
        print(f"  first: COPY {first_copy:.2f}s, FullCache() load {first_load:.2f}s", flush=True)
        for _ in range(ROUNDS):  # interleaved: COPY, then the load, each round
            started = time.perf_counter()
            size = run_sync(lambda: _copy(server.url), timeout=900)
            copies.append(time.perf_counter() - started)
            seconds, stats, _ = _load(server.url)
            loads.append(seconds)
            print(f"  COPY {copies[-1]:.2f}s, FullCache() load {seconds:.2f}s", flush=True)
    copy, load = statistics.median(copies), statistics.median(loads)
    rows = [
        [f"COPY users TO STDOUT, read into memory by asyncpg ({size / 2**20:.0f} MiB)", copy, 1.0],
        ["FullCache() load (FullCacheSource.reload)", load, load / copy],
    ]
    text = table(["what", "seconds (median)", "vs COPY"], rows)
    text += (
        "\n\nRounds (COPY / load, s): "
        + ", ".join(f"{c:.2f} / {ld:.2f}" for c, ld in zip(copies, loads, strict=True))
        + f"; before them, the process's first round: {first_copy:.2f} / {first_load:.2f} "
        f"({first_load / first_copy:.2f}x: a fresh worker's first load pays one-time "
        f"costs too).\n\nThe snapshot of {stats.rows:,} rows holds "
        f"{stats.memory / 2**20:.0f} MiB (its Arrow rows and key index, by its "
        f"statistics); the process's RSS grew by {grown:.0f} MiB over its first load."
    )
    note = (
        f"Load: a PostgreSQL 15 table of {TABLE_ROWS:,} rows (id bigint primary key, name "
        f"text, tier text, credit double precision) on loopback, FullCache() on its "
        f"defaults (load_timeout {FullCache().load_timeout:g} s, max_rows "
        f"{FullCache().max_rows:,}), {ROUNDS} interleaved rounds, medians; load average "
        f"at the start {load_avg[0]:.1f} / {load_avg[1]:.1f} / {load_avg[2]:.1f} (1/5/15 min)."
    )
    return (f"The load of {TABLE_ROWS:,} rows on FullCache's defaults", text), note


# -- the hot path --------------------------------------------------------------------------


def hot_part() -> tuple[tuple[str, str], str]:
    load_avg = os.getloadavg()
    with local_redis() as url:
        load_users(url)
        redis_source = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
        full = FullCacheSource(redis_source, FullCache(page_rows=1000))
        started = time.perf_counter()
        run_sync(full.reload, timeout=120)  # the first load, timed alone
        load_seconds = time.perf_counter() - started
        reloads, reload_cpu = [], []
        for _ in range(ROUNDS):  # reloads: the load without a process's one-time costs
            started, cpu = time.perf_counter(), time.process_time()
            run_sync(full.reload, timeout=120)
            reloads.append(time.perf_counter() - started)
            reload_cpu.append(time.process_time() - cpu)
        partial = LookupCache(max_rows=KEYS)
        keys = chunks(1)
        rate(redis_source, partial, keys)  # warms the LookupCache with every key asked
        best = {"Redis, no cache": 0.0, "LookupCache, warm": 0.0, "FullCache, warm": 0.0}
        for _ in range(ROUNDS):
            best["Redis, no cache"] = max(best["Redis, no cache"], rate(redis_source, None, keys))
            best["LookupCache, warm"] = max(
                best["LookupCache, warm"], rate(redis_source, partial, keys)
            )
            best["FullCache, warm"] = max(best["FullCache, warm"], rate(full, None, keys))
            print(best, flush=True)
        stats = run_sync(_statistics(full), timeout=10)
        run_sync(full.aclose, timeout=10)
    reference = best["Redis, no cache"]
    rows = [(label, value, value / reference) for label, value in best.items()]
    note = (
        f"Hot path: {CHUNKS} chunks of {CHUNK:,} uniform keys over {KEYS:,} JSON users, the "
        f"columnar lane in one process, Redis on loopback; best of {ROUNDS} rounds on a "
        f"shared (contended) machine. One load of the whole Redis dimension (SCAN pages of "
        f"1,000 keys, pipelined MGETs, decoding, the Arrow snapshot): {load_seconds:.2f} s "
        f"for {stats.rows:,} keys, {stats.bytes / 1e6:.1f} MB read (the process's first "
        f"load); {ROUNDS} reloads after it: median {statistics.median(reloads):.2f} s "
        f"({', '.join(f'{r:.2f}' for r in reloads)}), this process's CPU time median "
        f"{statistics.median(reload_cpu):.2f} s (all its threads: steadier than the wall "
        f"clock on a loaded machine). Load average at the start "
        f"{load_avg[0]:.1f} / {load_avg[1]:.1f} / {load_avg[2]:.1f} (1/5/15 min)."
    )
    section = ("Lookups on the columnar lane", table(["answered by", "keys/s", "of Redis"], rows))
    return section, note


def _statistics(full: FullCacheSource) -> Any:
    async def read() -> Any:
        return full.statistics()

    return read


if __name__ == "__main__":
    main()
