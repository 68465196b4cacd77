"""Memory over a long stream: RSS of the Python worker's side of ``lookup_join``.

10M rows (``ENRICH_BENCH_RSS_ROWS``) in Arrow batches of 10,000 go through
``enrich.spark.join.join_batches.enrich_batches`` (the function Spark's Python worker runs for
``lookup_join``) with a ``LookupCache`` of 100,000 rows over 200,000 distinct keys, half
of them in Redis: hits, misses, cache evictions and requests all the way. The resident
set size is sampled every million rows; the figure is its growth after the first
million (the cache and pools are warm by then). Target: growth < 50 MB.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from connectors.redis import RedisLookup
from enrich import LookupCache
from enrich.demo.local import local_redis
from enrich.lookup.join_settings import JoinSettings
from enrich.spark.join.join_batches import DEFAULT_SPARK_CAPACITY, JoinPlan, enrich_batches

from ._report import table, write
from .lookup import load_users

ROWS = int(os.environ.get("ENRICH_BENCH_RSS_ROWS", 10_000_000))
BATCH = 10_000
DISTINCT = 200_000


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def batches() -> Iterator[pa.RecordBatch]:
    # A multiplicative walk over the keys: every batch differs, no per-row Python here.
    step = pa.array(range(BATCH), pa.int64())
    for start in range(0, ROWS, BATCH):
        keys = pc.remainder(pc.multiply(pc.add(step, start), 7919), DISTINCT)
        yield pa.RecordBatch.from_arrays([keys], names=["user_id"])


def main() -> None:
    with local_redis() as url:
        load_users(url)  # user:0 .. user:99,999 exist: half the keys miss
        source = RedisLookup(
            url,
            key_template="user:{}",
            value="json",
            schema="name string, tier string, credit double",
        )
        plan = JoinPlan(
            name="rss",
            source=source,
            on=(0,),
            columns=("name", "tier", "credit"),
            # lookup_join's own defaults (its capacity is the Spark one, not the engine's).
            settings=JoinSettings(
                capacity=DEFAULT_SPARK_CAPACITY,
                cache=LookupCache(max_rows=100_000, ttl=600),
                timeout=None,
            ),
        )
        samples: list[list[object]] = []
        rows = 0
        started = time.perf_counter()
        for out in enrich_batches(plan, batches()):
            before = rows
            rows += out.num_rows
            if rows // 1_000_000 != before // 1_000_000:
                samples.append(
                    [f"{rows:,}", f"{rss_mb():.0f}", f"{time.perf_counter() - started:.0f}"]
                )
                print(f"  rows {samples[-1][0]}, RSS {samples[-1][1]} MB, {samples[-1][2]} s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # KiB
    first, last = float(str(samples[0][1])), float(str(samples[-1][1]))
    summary = (
        f"RSS after the first million rows {first:.0f} MB, at the end {last:.0f} MB: growth "
        f"{last - first:+.0f} MB over {rows - 1_000_000:,} rows "
        f"(target < 50 MB); peak {peak:.0f} MB."
    )
    print(summary)
    path = write(
        "rss",
        "Memory over a long stream",
        [
            (
                f"{rows:,} rows through enrich_batches with a LookupCache",
                table(["rows", "RSS MB", "seconds"], samples) + "\n\n" + summary,
            )
        ],
        notes=__doc__ or "",
    )
    print(f"written to {path}")
