"""The ``redis`` sink alone against what users write by hand, side by side in one run.

``ROWS`` orders (5 columns: two bigints, a double, two strings) from a cached in-memory
DataFrame on ``local[2]``, written to Redis on loopback:

  (hand, stream) ``foreachPartition`` with pipelined ``XADD`` in chunks of 500: the
  hand-written baseline for stream entries (at-least-once, no staging);
  (hand, hash) the same with pipelined ``DEL`` + ``HSET``;
  (sink) ``df.write.format("redis")``: stream entries and hashes, ``transactional``
  (staged a column at a time from Arrow batches, then one commit, with
  ``maxRowsPerCommit=0``: this measures the writer, and one commit of the whole write;
  ``sink_commit`` and ``pipeline`` measure the bounded default) and ``idempotent``
  (row by row, a ``MULTI`` per 500 rows).

Target (issue 18): the sink >= 3x the hand-written pipeline for streams and >= 2x for
hashes. ``ENRICH_BENCH_SINK_ROWS=N`` changes the size.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis

from enrich.demo.local import local_redis

from ._report import table, write
from .spark import PARTITIONS, start_spark

ROWS = int(os.environ.get("ENRICH_BENCH_SINK_ROWS", 200_000))
REPEAT = 2
CHUNK = 500


def _orders(spark: Any) -> Any:
    from pyspark.sql import functions as F

    df = spark.range(ROWS, numPartitions=PARTITIONS).select(
        F.col("id").alias("order_id"),
        (F.col("id") % 100_000).alias("user_id"),
        F.round(F.rand(3) * 100, 2).alias("amount"),
        F.concat(F.lit("n-"), F.col("id").cast("string")).alias("name"),
        F.lit("gold").alias("tier"),
    )
    df = df.cache()
    df.count()
    return df


def _hand_written(url: str, kind: str) -> Any:
    def write_partition(rows: Any) -> None:
        client = redis.Redis.from_url(url)
        pipe = client.pipeline(transaction=False)
        for n, row in enumerate(rows, 1):
            fields = {k: str(v) for k, v in row.asDict().items() if v is not None}
            if kind == "stream":
                pipe.xadd("hand:out", fields)
            else:
                key = f"hand:{row['order_id']}"
                pipe.delete(key)
                pipe.hset(key, mapping=fields)
            if n % CHUNK == 0:
                pipe.execute()
        pipe.execute()
        client.close()

    return write_partition


def _timed(run: Any, client: redis.Redis) -> float:
    best = 0.0
    for _ in range(REPEAT):
        client.flushall()
        started = time.perf_counter()
        run()
        best = max(best, ROWS / (time.perf_counter() - started))
    return best


def main() -> None:
    from enrich.spark import register_data_sources

    spark = start_spark()
    register_data_sources(spark)
    rates: dict[tuple[str, str], float] = {}
    load = os.getloadavg()[0]
    try:
        with local_redis() as url:
            client = redis.Redis.from_url(url)
            df = _orders(spark)
            for kind in ("stream", "hash"):
                hand = _hand_written(url, kind)
                rates[(kind, "hand")] = _timed(lambda h=hand: df.foreachPartition(h), client)
                for mode in ("transactional", "idempotent"):
                    target = ("stream", "sink:out") if kind == "stream" else ("key", "s:{order_id}")
                    writer = (
                        df.write.format("redis")
                        .option("url", url)
                        .option(*target)
                        .option("mode", mode)
                        .option("maxRowsPerCommit", "0")
                        .mode("append")
                    )
                    rates[(kind, mode)] = _timed(lambda w=writer: w.save(), client)
            client.flushall()
            client.close()
    finally:
        spark.stop()
    rows = []
    for kind in ("stream", "hash"):
        hand = rates[(kind, "hand")]
        rows.append([f"{kind}: hand-written foreachPartition, pipelined", hand, 1.0])
        for mode in ("transactional", "idempotent"):
            rate = rates[(kind, mode)]
            rows.append([f"{kind}: redis sink, {mode}", rate, rate / hand])
    write(
        "sink",
        "The redis sink alone against a hand-written foreachPartition pipeline",
        [
            (
                f"{ROWS:,} rows, local[{PARTITIONS}], best of {REPEAT}, load average "
                f"{load:.1f} before, {os.getloadavg()[0]:.1f} after",
                table(["path", "rows/s", "vs hand-written"], rows),
            )
        ],
        notes="Target (issue 18): >= 3x the hand-written pipeline for streams, >= 2x for hashes.",
    )


if __name__ == "__main__":
    main()
