"""The full cache's hot path, in one process (no Spark): the columnar lane over chunks of
10,000 keys answered by Redis (no cache), by a warm ``LookupCache``, and by a warm
``FullCache`` snapshot, side by side; and what one load of the dimension costs.

Run: ``python -m benchmarks full_cache`` (writes benchmarks/results/full_cache.md).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pyarrow as pa

from connectors.redis import RedisLookup
from enrich import FullCache, FullCacheSource, JoinMetrics, LookupCache
from enrich.demo.local import local_redis
from enrich.engine.records.arrow_types import arrow_schema
from enrich.engine.runtime import run_sync
from enrich.lookup.lane import ColumnarLane

from ._report import table, write
from .lookup import KEYS, SCHEMA, load_users

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
        how="left",
        on_error="fail",
        cache=cache,
        timeout=None,
        capacity=4 * CHUNK,
        max_batch=500,
        metrics=JoinMetrics(),
    )
    start = time.perf_counter()
    rows = sum(len(joined.structs) for joined in lane.run(enumerate(keys)))  # type: ignore[union-attr]
    return rows / (time.perf_counter() - start)


def main() -> None:
    with local_redis() as url:
        load_users(url)
        redis_source = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
        full = FullCacheSource(redis_source, FullCache(page_rows=1000))
        started = time.perf_counter()
        run_sync(full.reload, timeout=120)  # the first load, timed alone
        load_seconds = time.perf_counter() - started
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
    notes = (
        f"{CHUNKS} chunks of {CHUNK:,} uniform keys over {KEYS:,} JSON users, the columnar "
        f"lane in one process, Redis on loopback; best of {ROUNDS} rounds on a shared "
        f"(contended) machine. One load of the whole dimension (SCAN pages of 1,000 keys, "
        f"pipelined MGETs, decoding, the Arrow snapshot): {load_seconds:.2f} s for "
        f"{stats.rows:,} keys, {stats.bytes / 1e6:.1f} MB read."
    )
    write(
        "full_cache",
        "The full cache's hot path",
        [("Lookups on the columnar lane", table(["answered by", "keys/s", "of Redis"], rows))],
        notes=notes,
    )


def _statistics(full: FullCacheSource) -> Any:
    async def read() -> Any:
        return full.statistics()

    return read


if __name__ == "__main__":
    main()
