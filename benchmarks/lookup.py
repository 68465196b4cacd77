"""Lookup joins against Redis and HTTP, side by side with the usual hand-written code.

Redis on loopback, 100,000 keys holding JSON documents, no cache:
  the join through the operator vs (a) one sync GET per record and (b) one sync MGET per
  chunk of ``max_batch`` keys with no operator. Every path decodes the values into the
  same typed rows.
HTTP service adding 5 ms per request, capacity 100: per-key requests vs Little's law,
  and the batch endpoint.
A Zipf-distributed key stream with the cache on: hit ratio and throughput.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import redis

import enrich
from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from enrich.demo.dimension_service import user
from enrich.demo.local import dimension_service, local_redis

from ._report import best_rate, table, write

KEYS = 100_000
LOOKUPS = int(os.environ.get("ENRICH_BENCH_LOOKUPS", 1_000_000))
SCHEMA = enrich.Schema.of("name string, tier string, credit double")
MAX_BATCH = 500

try:
    import orjson

    loads: Any = orjson.loads
except ImportError:  # pragma: no cover
    loads = json.loads


def load_users(url: str) -> None:
    client = redis.Redis.from_url(url)
    with client.pipeline(transaction=False) as pipe:
        for start in range(0, KEYS, 5_000):
            pipe.mset({f"user:{i}": json.dumps(user(i)) for i in range(start, start + 5_000)})
        pipe.execute()
    client.close()


def decode(raw: bytes | None) -> tuple[Any, ...] | None:
    return None if raw is None else SCHEMA.coerce(loads(raw))


def sync_get(url: str, keys: list[int]) -> int:
    client = redis.Redis.from_url(url)
    rows = [decode(client.get(f"user:{k}")) for k in keys]
    client.close()
    return len(rows)


def sync_mget(url: str, keys: list[int]) -> int:
    client = redis.Redis.from_url(url)
    count = 0
    for start in range(0, len(keys), MAX_BATCH):
        chunk = keys[start : start + MAX_BATCH]
        values = client.mget([f"user:{k}" for k in chunk])
        count += len([decode(v) for v in values])
    client.close()
    return count


def chunks(keys: list[int], capacity: int) -> list[tuple[int, list[int]]]:
    size = enrich.chunk_rows(capacity)
    return [(n, keys[n : n + size]) for n in range(0, len(keys), size)]


def through_join(source: Any, keys: list[int], mode: str, capacity: int, cache: Any = None) -> int:
    """Rows joined by ``lookup_chunks`` (the path Spark takes: chunks of keys in, columns
    of rows out); the chunks are cut beforehand, as Arrow batches arrive already cut."""
    joined = enrich.lookup_chunks(
        chunks(keys, capacity),
        source,
        mode=mode,
        capacity=capacity,
        timeout=None,
        max_batch=MAX_BATCH,
        cache=cache,
    )
    return sum(len(chunk.indices) for chunk in joined)


def through_lane(source: Any, keys: list[int], capacity: int, cache: Any = None) -> int:
    """Rows joined by the columnar lane (the path Spark takes for a columnar source):
    chunks of an int64 Arrow column in, dimension structs out."""
    import pyarrow as pa

    from enrich.lookup.lane import ColumnarLane

    column = pa.array(keys, pa.int64())
    size = enrich.chunk_rows(capacity)
    lane = ColumnarLane(
        source,
        pa.struct([("name", pa.string()), ("tier", pa.string()), ("credit", pa.float64())]),
        how="left",
        on_error="fail",
        cache=cache,
        timeout=None,
        capacity=capacity,
        max_batch=MAX_BATCH,
        metrics=enrich.JoinMetrics(),
    )
    pieces = ((n, column.slice(n, size)) for n in range(0, len(column), size))
    return sum(len(joined.structs) for joined in lane.run(pieces))  # type: ignore[union-attr]


def redis_section(url: str) -> str:
    rng = random.Random(7)
    keys = [rng.randrange(KEYS) for _ in range(LOOKUPS)]
    source = RedisLookup(
        url, key_template="user:{}", value="json", schema=SCHEMA, max_batch=MAX_BATCH
    )
    get_rate = best_rate(lambda: sync_get(url, keys[: max(LOOKUPS // 10, 1000)]), repeat=1)
    mget_rate = best_rate(lambda: sync_mget(url, keys), repeat=2)
    rows: list[list[Any]] = [
        ["(a) sync GET per record", get_rate, 1.0, get_rate / mget_rate],
        [f"(b) sync MGET per {MAX_BATCH} keys", mget_rate, mget_rate / get_rate, 1.0],
    ]
    for mode in ("ordered", "unordered"):
        rate = best_rate(lambda m=mode: through_join(source, keys, m, 4 * MAX_BATCH), repeat=2)
        rows.append(
            [
                f"lookup join, {mode}, capacity {4 * MAX_BATCH}",
                rate,
                rate / get_rate,
                rate / mget_rate,
            ]
        )
    for capacity in (2048, 8192, 32768):
        rate = best_rate(lambda c=capacity: through_lane(source, keys, c), repeat=2)
        rows.append(
            [f"columnar lane, capacity {capacity}", rate, rate / get_rate, rate / mget_rate]
        )
    return table(["path", "lookups/s", "vs (a)", "vs (b)"], rows)


def http_section(base: str) -> str:
    latency = 0.005
    capacity = 100
    bound = capacity / latency
    rng = random.Random(11)
    count = int(bound * 2)
    keys = [rng.randrange(KEYS) for _ in range(count)]
    per_key = HttpLookup(base + "/users/{}", schema=SCHEMA, max_connections=capacity)
    batched = HttpLookup(
        base + "/users/{}",
        schema=SCHEMA,
        batch_url=base + "/users/_batch",
        max_batch=100,
        max_connections=capacity,
    )
    rows = []
    for label, source in (("per-key GET", per_key), ("batch endpoint, 100 keys per POST", batched)):
        rate = best_rate(lambda s=source: through_join(s, keys, "unordered", capacity), repeat=2)
        rows.append([label, capacity, bound, rate, rate / bound])
    return table(
        [
            "HTTP source (5 ms per request)",
            "capacity",
            "Little's law bound",
            "lookups/s",
            "fraction of bound",
        ],
        rows,
    )


def zipf_keys(n: int, s: float, count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    weights = [1.0 / (rank**s) for rank in range(1, n + 1)]
    return rng.choices(range(n), weights=weights, k=count)


def zipf_section(url: str) -> str:
    keys = zipf_keys(KEYS, 1.1, min(LOOKUPS, 500_000), seed=3)
    source = RedisLookup(
        url, key_template="user:{}", value="json", schema=SCHEMA, max_batch=MAX_BATCH
    )
    rows = []
    base = best_rate(lambda: through_join(source, keys, "ordered", 4 * MAX_BATCH), repeat=1)
    rows.append(["no cache", "-", base, 1.0])
    for max_rows in (1_000, 10_000):
        cache = enrich.LookupCache(max_rows=max_rows, ttl=300)
        capacity = 4 * MAX_BATCH
        joined = enrich.lookup_chunks(
            chunks(keys, capacity),
            source,
            capacity=capacity,
            timeout=None,
            max_batch=MAX_BATCH,
            cache=cache,
        )
        rate = best_rate(lambda j=joined: sum(len(c.indices) for c in j), repeat=1)
        stats = joined.function.cache_statistics()  # a cold cache, warming up
        ratio = stats.hit_ratio if stats else 0.0
        rows.append(
            [f"LookupCache(max_rows={max_rows:,}), cold", f"{ratio:.2f}", rate, rate / base]
        )
    return table(["Zipf(1.1) keys over 100,000", "hit ratio", "lookups/s", "vs no cache"], rows)


def main() -> None:
    with local_redis() as url, dimension_service(latency=0.005, users=KEYS) as base:
        load_users(url)
        path = write(
            "lookup",
            "Lookup joins",
            [
                (
                    f"Redis on loopback: {LOOKUPS:,} lookups over {KEYS:,} keys, no cache",
                    redis_section(url),
                ),
                ("HTTP dimension service", http_section(base)),
                ("Zipf-distributed keys with the cache", zipf_section(url)),
            ],
            notes="Rerun: `./scripts/dev bench lookup` (ENRICH_BENCH_LOOKUPS=N to shorten).",
        )
    print(f"written to {path}")
