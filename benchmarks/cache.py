"""Does the cache pay? ``lookup_join`` with and without a ``LookupCache``, side by side
with an Arrow passthrough, on ``local[2]`` with Redis on loopback.

Two key distributions over 100,000 users, ``ROWS`` orders each, 2 partitions, ``noop``
sink: uniform, and skewed (80% of the rows on 1,000 hot keys, the rest uniform). Paths,
per distribution, in rounds (every path once, then again):

  lookup_join without a cache; lookup_join with ``LookupCache(max_rows=200_000)``, warm
  (an untimed pass first fills each worker's cache, so every key is cached, as in the
  issue's measurement); and the floor of any Python stage, a ``mapInArrow`` that only
  appends null dimension columns.

Also, in one process without Spark (the worker-side function ``enrich_batches`` over
Arrow batches of 10,000 rows, the same keys): the same three, which isolates the lane
from Spark's transfer costs.

Targets (issue 18): with a cache the join is never slower than without, on both
distributions; skewed keys with a cache reach >= 0.7 of the passthrough.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pyarrow as pa

from connectors.redis import RedisLookup
from enrich import LookupCache, Schema
from enrich.demo.local import local_redis

from ._report import best_rate, table, write
from .lookup import KEYS, load_users
from .spark import PARTITIONS, SCHEMA, sink, start_spark

ROWS = int(os.environ.get("ENRICH_BENCH_CACHE_ROWS", 1_000_000))
HOT_KEYS = 1_000
HOT_SHARE = 0.8
REPEAT = 3
CACHE_ROWS = 200_000
FIELDS = [("name", pa.string()), ("tier", pa.string()), ("credit", pa.float64())]


def null_dimensions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The passthrough: each batch with null ``name``, ``tier``, ``credit`` appended."""
    for batch in batches:
        nulls = [pa.nulls(batch.num_rows, kind) for _, kind in FIELDS]
        names = [*batch.schema.names, *(name for name, _ in FIELDS)]
        yield pa.RecordBatch.from_arrays([*batch.columns, *nulls], names=names)


_dimension: list[pa.Array] = []


def in_memory_take(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The floor of any enrichment that produces these columns: every user's row held
    in this worker as Arrow columns (built once, untimed), each batch's rows taken by
    key. What a perfect cache that costs nothing to probe would give."""
    if not _dimension:
        from enrich.demo.dimension_service import user

        users = [user(uid) for uid in range(KEYS)]
        _dimension.extend(pa.array([u[name] for u in users], kind) for name, kind in FIELDS)
    for batch in batches:
        keys = batch.column("user_id")
        names = [*batch.schema.names, *(name for name, _ in FIELDS)]
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, *(column.take(keys) for column in _dimension)], names=names
        )


def keys_of(kind: str, rows: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    if kind == "uniform":
        return [rng.randrange(KEYS) for _ in range(rows)]
    return [
        rng.randrange(HOT_KEYS) if rng.random() < HOT_SHARE else rng.randrange(KEYS)
        for _ in range(rows)
    ]


def orders(spark: Any, kind: str, seed: int) -> Any:
    """``ROWS`` orders with keys of ``kind``, a cached DataFrame of ``PARTITIONS``
    partitions."""
    from pyspark.sql import functions as F

    uniform = (F.rand(seed) * KEYS).cast("bigint")
    if kind == "skewed":
        hot = (F.rand(seed + 1) * HOT_KEYS).cast("bigint")
        key = F.when(F.rand(seed + 2) < HOT_SHARE, hot).otherwise(uniform)
    else:
        key = uniform
    df = spark.range(ROWS, numPartitions=PARTITIONS).select(
        F.col("id").alias("order_id"), key.alias("user_id")
    )
    df = df.cache()
    df.count()
    return df


def spark_section(spark: Any, url: str) -> tuple[str, dict[str, float]]:
    from pyspark.sql.types import StructType

    from enrich.spark import lookup_join, statistics

    source = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
    rows_out: list[list[Any]] = []
    ratios: dict[str, float] = {}
    for kind in ("uniform", "skewed"):
        df = orders(spark, kind, seed=5)
        cache = LookupCache(max_rows=CACHE_ROWS)
        dimension = StructType.fromDDL(SCHEMA)
        schema = StructType([*df.schema.fields, *dimension.fields])
        paths = {
            "passthrough": df.mapInArrow(null_dimensions, schema),
            "in-memory take": df.mapInArrow(in_memory_take, schema),
            "no cache": lookup_join(df, source, on="user_id", timeout=None, name=f"nc_{kind}"),
            "cache": lookup_join(
                df, source, on="user_id", timeout=None, cache=cache, name=f"c_{kind}"
            ),
        }
        sink(paths["cache"], ROWS)  # untimed: fills each worker's cache
        sink(paths["no cache"], ROWS)  # untimed: each worker's pool opened
        sink(paths["in-memory take"], ROWS)  # untimed: each worker's table built
        warm = statistics(f"c_{kind}")
        rates = dict.fromkeys(paths, 0.0)
        for round_ in range(REPEAT):
            for label, frame in paths.items():
                rate = best_rate(partial(sink, frame, ROWS), repeat=1)
                rates[label] = max(rates[label], rate)
                print(f"  {kind}, round {round_ + 1}, {label}: {rate:,.0f} rows/s")
        df.unpersist()
        timed = statistics(f"c_{kind}")
        hits = timed.cache_hits - warm.cache_hits
        hit_ratio = hits / max(1, hits + timed.cache_misses - warm.cache_misses)
        p, n, c = rates["passthrough"], rates["no cache"], rates["cache"]
        t = rates["in-memory take"]
        rows_out.append([kind, p, t, n, c, f"{hit_ratio:.3f}", c / n, n / p, c / p, t / p, c / t])
        ratios[kind + " cache/no cache"] = c / n
        ratios[kind + " cache/passthrough"] = c / p
        ratios[kind + " take/passthrough"] = t / p
    headers = ["keys", "passthrough", "in-memory take", "no cache", "cache (warm)", "hit ratio"]
    headers += ["cache / no cache", "no cache / pass", "cache / pass", "take / pass"]
    headers += ["cache / take"]
    return table(headers, rows_out), ratios


def in_process_section(url: str) -> str:
    """The worker-side function alone, no Spark: the same paths over Arrow batches."""
    from enrich.lookup.settings import JoinSettings
    from enrich.spark.arrow import DEFAULT_SPARK_CAPACITY, JoinPlan, enrich_batches

    source = RedisLookup(url, key_template="user:{}", value="json", schema=Schema.of(SCHEMA))
    out: list[list[Any]] = []
    for kind in ("uniform", "skewed"):
        keys = keys_of(kind, ROWS, seed=5)
        column = pa.array(keys, pa.int64())
        ids = pa.array(range(len(keys)), pa.int64())
        names = ["order_id", "user_id"]
        batches = [
            pa.record_batch([ids.slice(n, 10_000), column.slice(n, 10_000)], names)
            for n in range(0, len(keys), 10_000)
        ]
        plans = {
            label: JoinPlan(
                f"p_{kind}_{label}",
                source,
                (1,),
                ("name", "tier", "credit"),
                JoinSettings(capacity=DEFAULT_SPARK_CAPACITY, timeout=None, cache=cache),
            )
            for label, cache in (("no cache", None), ("cache", LookupCache(max_rows=CACHE_ROWS)))
        }
        functions: dict[str, Any] = {
            "passthrough": null_dimensions,
            **{label: partial(enrich_batches, plan) for label, plan in plans.items()},
        }
        for label in ("cache", "no cache"):  # fills the cache; opens the pool
            count(functions[label], batches)
        rates = dict.fromkeys(functions, 0.0)
        for _ in range(REPEAT):
            for label, function in functions.items():
                rate = best_rate(partial(count, function, batches), repeat=1)
                rates[label] = max(rates[label], rate)
        n, c = rates["no cache"], rates["cache"]
        out.append([kind, n, c, c / n])
    return table(["keys", "no cache", "cache (warm)", "cache / no cache"], out)


def count(function: Any, batches: list[pa.RecordBatch]) -> int:
    return sum(b.num_rows for b in function(iter(batches)))


def targets(ratios: dict[str, float]) -> str:
    checks = [
        ("uniform: cache vs no cache", ratios["uniform cache/no cache"], ">= 1.0", 1.0),
        ("skewed: cache vs no cache", ratios["skewed cache/no cache"], ">= 1.0", 1.0),
        ("skewed: cache vs passthrough", ratios["skewed cache/passthrough"], ">= 0.7", 0.7),
    ]
    # Not a target: the same columns taken from memory at no probe cost, the ceiling of
    # any cache (the JVM's reading of real strings instead of nulls included).
    checks.append(
        ("skewed: in-memory take vs passthrough", ratios["skewed take/passthrough"], "-", 0.0)
    )
    rows = [[w, r, t, "-" if not b else "met" if r >= b else "MISSED"] for w, r, t, b in checks]
    return table(["ratio", "measured", "target", ""], rows)


NOTES = """\
Every path reads the same cached DataFrame (`order_id`, `user_id`; {rows:,} rows, keys
over {keys:,} users, each a JSON document in Redis) and writes to the `noop` sink; a rate
is rows over the wall time of the Spark job, the best of {repeat} rounds. `lookup_join`
runs on its defaults (`timeout=None`), the cache is `LookupCache(max_rows={cache:,})`,
warmed by one untimed pass (each of the two Python workers then holds the keys it saw).
The passthrough is `mapInArrow` appending three null columns (the floor of any Python
stage); the in-memory take is `mapInArrow` appending the real columns, taken by key from
every user's row held as Arrow in the worker (the ceiling of any cache: no probe, no
request, but the same data for Spark to read back). The in-process table runs
`enrich.spark.arrow.enrich_batches` over batches of 10,000 rows in one process: no JVM,
no transfer, the lane alone.

Rerun: `python -m benchmarks cache` (`ENRICH_BENCH_CACHE_ROWS=N` changes the size).
"""


def main() -> None:
    started = time.perf_counter()
    with local_redis() as url:
        load_users(url)
        print(f"in one process: {ROWS:,} rows")
        local = in_process_section(url)
        spark = start_spark()
        try:
            print(f"Spark: {ROWS:,} rows, {PARTITIONS} partitions")
            spark_table, ratios = spark_section(spark, url)
        finally:
            spark.stop()
    path = write(
        "cache",
        "Lookup cache: does it pay?",
        [
            (f"Spark, local[2], {ROWS:,} rows, noop sink (rows/s)", spark_table),
            ("Targets", targets(ratios)),
            (f"One process, no Spark: enrich_batches over {ROWS:,} rows (rows/s)", local),
        ],
        notes=NOTES.format(rows=ROWS, keys=KEYS, repeat=REPEAT, cache=CACHE_ROWS),
    )
    print(f"written to {path} in {time.perf_counter() - started:.0f}s")
