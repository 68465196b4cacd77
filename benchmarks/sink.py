"""The ``redis`` sink alone against what users write by hand, side by side in one run.

``ROWS`` orders (5 columns: two bigints, a double, two strings) from a cached in-memory
DataFrame on ``local[2]``, written to Redis on loopback:

  (hand, stream) ``foreachPartition`` with pipelined ``XADD`` in chunks of 500: the
  hand-written baseline for stream entries (at-least-once, no staging);
  (hand, hash) the same with pipelined ``DEL`` + ``HSET``;
  (sink) ``df.write.format("redis")``: stream entries and hashes, ``transactional`` on
  its defaults (staged a column at a time from Arrow batches, then published by the
  commit in steps of 1,000 rows, each one script), the same with ``maxRowsPerCommit=0``
  (the whole write in one script), and ``idempotent`` (commands built a column at a
  time in RESP, a ``MULTI`` per 1,000 rows, pipelined).

Then the idempotent writer alone, in this process (no Spark), ``ONE_PROCESS_ROWS`` rows
of the same columns from Arrow batches of 10,000: with a ``MULTI`` per chunk (what the
sink does: a hash is never seen half replaced) against the same chunks without it,
client CPU, redis-server CPU (from ``/proc``) and wall time per row, best of 3
interleaved rounds.

Targets (issues 18 and 34): the sink >= 3x the hand-written pipeline for stream entries,
>= 2x for hashes in ``idempotent`` mode. ``ENRICH_BENCH_SINK_ROWS=N`` changes the size.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import redis

from enrich.demo.local import local_redis

from ._report import table, write
from .spark import PARTITIONS, start_spark

ROWS = int(os.environ.get("ENRICH_BENCH_SINK_ROWS", 200_000))
REPEAT = 2
CHUNK = 500
ONE_PROCESS_ROWS = 100_000
# (mode, maxRowsPerCommit): None leaves the option out (the defaults)
SINK_PATHS = (("transactional", None), ("transactional", "0"), ("idempotent", None))


def _label(mode: str, step: str | None) -> str:
    if mode == "transactional":
        return "transactional (defaults)" if step is None else "transactional, one step"
    return mode


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


def _arrow_orders(rows: int) -> list[Any]:
    import numpy as np
    import pyarrow as pa

    batches = []
    for start in range(0, rows, 10_000):
        ids = np.arange(start, min(rows, start + 10_000))
        columns = [ids, ids % 100_000, np.round(np.random.default_rng(3).random(len(ids)) * 100, 2),
                   [f"n-{i}" for i in ids], ["gold"] * len(ids)]  # fmt: skip
        names = ["order_id", "user_id", "amount", "name", "tier"]
        batches.append(pa.RecordBatch.from_arrays([pa.array(c) for c in columns], names=names))
    return batches


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_process(url: str) -> str:
    """The idempotent writer alone: a MULTI per chunk against none (see the docstring)."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    from enrich.spark.sink.redis import direct
    from enrich.spark.sink.redis.row_writes import RowEncoder, SinkSettings

    schema = StructType([StructField(n, t) for n, t in (
        ("order_id", LongType()), ("user_id", LongType()), ("amount", DoubleType()),
        ("name", StringType()), ("tier", StringType()))])  # fmt: skip
    batches = _arrow_orders(ONE_PROCESS_ROWS)
    client = redis.Redis.from_url(url)
    pid = int(client.info("server")["process_id"])
    best: dict[tuple[str, bool], list[float]] = {}
    for _ in range(3):
        for target in ("stream", "hash"):
            option = {"stream": "one:out"} if target == "stream" else {"key": "one:{order_id}"}
            settings = SinkSettings.of({"url": url, "mode": "idempotent", **option})
            encoder = RowEncoder(settings, schema)
            for multi in (True, False):
                client.flushall()
                cpu, server, wall = time.process_time(), _cpu_seconds(pid), time.perf_counter()
                direct.write(client, encoder, iter(batches), None, transaction=multi)
                spent = [time.perf_counter() - wall, time.process_time() - cpu,
                         _cpu_seconds(pid) - server]  # fmt: skip
                per_row = [seconds * 1e6 / ONE_PROCESS_ROWS for seconds in spent]
                if (target, multi) not in best or per_row[0] < best[(target, multi)][0]:
                    best[(target, multi)] = per_row
    client.flushall()
    client.close()
    labels = {True: "MULTI per chunk (the sink)", False: "no MULTI"}
    rows = [
        [f"{target}: {labels[multi]}", *best[(target, multi)]]
        for target in ("stream", "hash")
        for multi in (True, False)
    ]
    return table(["idempotent writer, 1,000-row chunks", "wall us/row", "client CPU us/row",
                  "redis-server CPU us/row"], rows)  # fmt: skip


def main() -> None:
    from enrich.spark import register_data_sources

    spark = start_spark()
    register_data_sources(spark)
    rates: dict[tuple[str, ...], float] = {}
    load = os.getloadavg()[0]
    try:
        with local_redis() as url:
            client = redis.Redis.from_url(url)
            df = _orders(spark)
            for kind in ("stream", "hash"):
                hand = _hand_written(url, kind)
                rates[(kind, "hand")] = _timed(lambda h=hand: df.foreachPartition(h), client)
                for mode, step in SINK_PATHS:
                    target = ("stream", "sink:out") if kind == "stream" else ("key", "s:{order_id}")
                    writer = df.write.format("redis").option("url", url).option(*target)
                    writer = writer.option("mode", mode).mode("append")
                    if step is not None:
                        writer = writer.option("maxRowsPerCommit", step)
                    rates[(kind, mode, step)] = _timed(lambda w=writer: w.save(), client)
            client.flushall()
            client.close()
            alone = one_process(url)
    finally:
        spark.stop()
    rows = []
    for kind in ("stream", "hash"):
        hand = rates[(kind, "hand")]
        rows.append([f"{kind}: hand-written foreachPartition, pipelined", hand, 1.0])
        for mode, step in SINK_PATHS:
            rate = rates[(kind, mode, step)]
            rows.append([f"{kind}: redis sink, {_label(mode, step)}", rate, rate / hand])
    write(
        "sink",
        "The redis sink alone against a hand-written foreachPartition pipeline",
        [
            (
                f"{ROWS:,} rows, local[{PARTITIONS}], best of {REPEAT}, load average "
                f"{load:.1f} before, {os.getloadavg()[0]:.1f} after",
                table(["path", "rows/s", "vs hand-written"], rows),
            ),
            (
                f"The idempotent writer alone, {ONE_PROCESS_ROWS:,} rows in one process, best "
                "of 3 interleaved rounds",
                alone,
            ),
        ],
        notes="Targets (issues 18 and 34): >= 3x the hand-written pipeline for stream "
        "entries, >= 2x for hashes in idempotent mode; issue 43: stream entries >= 3x on the "
        "sink's defaults (transactional, steps of 1,000 rows).",
    )


if __name__ == "__main__":
    main()
