"""Key affinity (``lookup_join(shuffle=...)``) and the full cache on ``local-cluster``.

Two executor JVMs of one core each (``local-cluster[2,1,1024]``), each with its own Python
worker and so its own per-process cache. Skewed keys: 80% of the rows on 1,000 hot keys,
the rest uniform over 100,000 keys, all stored as JSON in a private redis-server. Each
configuration runs once with a fresh cache (a new cache object: new per-process stores),
so the hit ratio is that of one job; the input is cached in Spark's memory first, so the
timing holds the join and, with ``shuffle``, the shuffle.

Run: ``python -m benchmarks affinity`` (writes benchmarks/results/affinity.md).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import redis

from benchmarks._report import table, write
from connectors.redis import RedisLookup
from enrich import FullCache, LookupCache
from enrich.demo.local import local_redis

ROOT = Path(__file__).resolve().parents[1]
ROWS = int(os.environ.get("AFFINITY_ROWS", "400000"))
KEYS = 100_000
HOT = 1_000
PARTITIONS = 8
CACHE_ROWS = 20_000


def store(url: str) -> None:
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for key in range(KEYS):
        pipe.set(f"user:{key}", json.dumps({"name": f"user {key}", "tier": "gold"}))
        if key % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    client.close()


def start_spark() -> Any:
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    from enrich.spark import session

    spark = session(
        "enrich-affinity",
        "local-cluster[2,1,1024]",
        spark__ui__enabled="false",
        spark__ui__showConsoleProgress="false",
        spark__executor__memory="512m",
        spark__executorEnv__PYTHONPATH=os.environ["PYTHONPATH"],
        spark__executorEnv__PYSPARK_PYTHON=sys.executable,
        spark__sql__shuffle__partitions=str(PARTITIONS),
        spark__sql__adaptive__enabled="false",  # keep the 8 shuffle partitions as set
        spark__python__worker__reuse="true",
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def orders(spark: Any) -> Any:
    from pyspark.sql import functions as F

    hot = (F.rand(11) * HOT).cast("bigint")
    cold = (F.rand(12) * KEYS).cast("bigint")
    df = spark.range(ROWS, numPartitions=PARTITIONS).select(
        F.col("id").alias("order_id"),
        F.when(F.rand(10) < 0.8, hot).otherwise(cold).alias("user_id"),
    )
    df = df.cache()
    df.count()
    return df


def run(df: Any, url: str, cache: Any, shuffle: bool, name: str) -> dict[str, Any]:
    from enrich.spark import lookup_join, statistics

    users = RedisLookup(
        url, key_template="user:{}", value="json", schema="name string, tier string"
    )
    out = lookup_join(
        df, users, on="user_id", cache=cache, shuffle=shuffle, timeout=None, name=name
    )
    start = time.perf_counter()
    out.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - start
    metrics = statistics(name)
    return {
        "rate": ROWS / elapsed,
        "hit_ratio": metrics.cache_hit_ratio,
        "keys_requested": metrics.keys_requested,
        "requests": metrics.requests,
    }


def main() -> None:
    with local_redis() as url:
        store(url)
        spark = start_spark()
        try:
            df = orders(spark)
            run(df, url, None, False, "warm-up")  # workers and connection pools up
            rows = []
            configs = [
                ("no cache", lambda: None),
                (f"LookupCache(max_rows={CACHE_ROWS:,})", lambda: LookupCache(max_rows=CACHE_ROWS)),
                ("FullCache()", lambda: FullCache()),
            ]
            for label, make in configs:
                for shuffle in (False, True):
                    cache = make()
                    # cold: a new cache (new per-process stores); warm: the same again,
                    # its stores (or snapshots) kept by the reused Python workers.
                    for run_kind in ("cold", "warm") if cache is not None else ("-",):
                        name = f"{label} shuffle={shuffle} {run_kind}"
                        result = run(df, url, cache, shuffle, name)
                        full = label.startswith("FullCache")
                        rows.append(
                            (
                                label,
                                run_kind,
                                "yes" if shuffle else "no",
                                result["rate"],
                                "-" if full else result["hit_ratio"],
                                0 if full else result["keys_requested"],
                            )
                        )
                        print(name, result, flush=True)
        finally:
            spark.stop()
    headers = ["cache", "run", "shuffle", "rows/s", "cache hit ratio", "keys asked of Redis"]
    conditions = (
        f"local-cluster[2,1,1024] (two executors, one core each), {ROWS:,} rows in "
        f"{PARTITIONS} cached partitions, 80% on {HOT:,} hot keys of {KEYS:,}; Redis on "
        "loopback; noop sink; one run each, side by side, on a shared (contended) machine. "
        "'cold': a new cache object (the stores or snapshots start empty; a FullCache's load "
        "is inside the timing); 'warm': the same cache object run again (the reused Python "
        "workers keep its stores and snapshots). "
        "The hit ratio counts each chunk's distinct keys once (the lane probes a chunk's "
        "distinct keys); a FullCache asks Redis nothing per key: its load (SCAN and MGET "
        "pages) reads every key once per Python worker, inside the timing."
    )
    write(
        "affinity",
        "Key affinity and the full cache",
        [("Redis on loopback, skewed keys, two executors", table(headers, rows))],
        notes=conditions,
    )


if __name__ == "__main__":
    main()
