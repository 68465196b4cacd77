"""How long the transactional sink's commit blocks Redis: the longest command, by SLOWLOG.

The commit publishes a whole batch in one Lua script, which runs alone on the server:
its duration is everyone's pause. This stages ``N`` rows (4 columns, encoded by the
sink's own codec) in one staging list, as the executors do, runs the real commit
(:func:`enrich.spark.sink.commit.commit`), and reads the longest command from
``SLOWLOG`` (threshold 0: every command logged), for a stream target and a hash target.
Sizes: ``ENRICH_BENCH_COMMIT="10000,100000,1000000"`` (the default).

Then the job itself at its defaults: a backlog of ``N`` entries in a stream, read by the
``redis-stream`` source, enriched by ``lookup_join`` and written by the ``redis`` sink in
mode transactional (``Trigger.AvailableNow``, local[2], every option at its default:
micro-batches of at most 5,000 entries, commits of at most 5,000 rows), with the longest
command Redis ran meanwhile from ``SLOWLOG``, whoever sent it (the source's reads, the
lookups, the staging, the commits); and, beside it, the same job with both limits
lifted (``maxEntriesPerTrigger=0``, ``maxRowsPerCommit=0``).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import redis

from connectors.redis import RedisLookup
from enrich.demo.local import local_redis
from enrich.spark.sink import commit as redis_commit
from enrich.spark.sink.codec import pack
from enrich.spark.sink.rows import STEP_ROWS

from ._report import table, write
from .lookup import load_users
from .pipeline import ORDER_SCHEMA, STREAM, fill_stream
from .spark import SCHEMA, start_spark

SIZES = [int(n) for n in os.environ.get("ENRICH_BENCH_COMMIT", "10000,100000,1000000").split(",")]
STAGE_CHUNK = 5000
TRADE_OFF = (2_500, 20_000, 0)  # the job's limits beside the default, at the middle size
IDENTITY = "bench"


def _op(kind: str, i: int) -> bytes:
    fields = ["order_id", str(i), "user_id", str(i % 1000), "amount", "12.5", "tier", "gold"]
    if kind == "stream":
        return pack(["x", "bench:out", *fields])
    return pack(["h", f"bench:order:{i}", *fields])


def measure(client: redis.Redis, kind: str, rows: int) -> tuple[float, float]:
    """(longest command in ms, wall time of the commit in ms)."""
    client.flushall()
    staging = redis_commit.staging_key(IDENTITY, "1", 0, "a")
    client.sadd(redis_commit.index_key(IDENTITY), staging)
    for start in range(0, rows, STAGE_CHUNK):
        client.rpush(staging, *(_op(kind, i) for i in range(start, min(rows, start + STAGE_CHUNK))))
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1024)
    client.slowlog_reset()
    began = time.perf_counter()
    redis_commit.commit(client, IDENTITY, "1", [(staging, rows)], marked=True, step=None)
    wall = (time.perf_counter() - began) * 1000
    longest = max(entry["duration"] for entry in client.slowlog_get(1024)) / 1000
    return longest, wall


def pipeline(spark: Any, url: str, rows: int, bound: int | None) -> list[Any]:
    """The job over a backlog of ``rows`` entries: [batches, longest command ms, rows/s].
    ``bound``: None for the defaults, else both limits set to it (0: lifted)."""
    from enrich.spark import lookup_join

    client = redis.Redis.from_url(url, socket_timeout=600)
    for key in ("enriched", *client.scan_iter("enrich:sink:*", count=10_000)):
        client.delete(key)
    fill_stream(url, rows)
    client.config_set("slowlog-log-slower-than", 1000)  # commands of 1 ms and more
    client.slowlog_reset()
    users = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
    source = spark.readStream.format("redis-stream").option("url", url).option("stream", STREAM)
    if bound is not None:
        source = source.option("maxEntriesPerTrigger", str(bound))
    enriched = lookup_join(source.schema(ORDER_SCHEMA).load(), users, on="user_id")
    with tempfile.TemporaryDirectory(prefix="enrich-bench-") as checkpoint:
        writer = (
            enriched.drop("stream_id")
            .writeStream.format("redis")
            .option("url", url)
            .option("stream", "enriched")
            .option("checkpointLocation", checkpoint)
        )
        if bound is not None:
            writer = writer.option("maxRowsPerCommit", str(bound))
        started = time.perf_counter()
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        elapsed = time.perf_counter() - started
        batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    log = client.slowlog_get(10_000)
    longest = max((entry["duration"] for entry in log), default=0) / 1000
    landed = client.xlen("enriched")
    client.close()
    if landed != rows:
        raise RuntimeError(f"{landed} rows landed, {rows} expected")
    return [batches, longest, rows / elapsed]


def jobs_section(url: str) -> str:
    from enrich.spark import register_data_sources

    spark = start_spark()
    register_data_sources(spark)
    out = []
    try:
        load_users(url)
        pipeline(spark, url, 20_000, None)  # warm-up: workers, pools
        runs: list[tuple[int, int | None]] = [(rows, None) for rows in SIZES]
        middle = SIZES[len(SIZES) // 2]
        runs += [(middle, bound) for bound in TRADE_OFF]
        for rows, bound in runs:
            batches, longest, rate = pipeline(spark, url, rows, bound)
            if bound is None:
                limits = f"defaults (steps of {STEP_ROWS:,} rows)"
            else:
                limits = f"both limits {bound:,}" if bound else "both limits lifted (0)"
            out.append([rows, limits, batches, longest, rate])
            print(f"sink_commit job: {rows:,} {limits}: {longest:.1f} ms, {rate:,.0f}/s")
    finally:
        spark.stop()
    headers = ["backlog", "settings", "batches", "longest command ms", "rows/s"]
    return table(headers, out)


def main() -> None:
    rows_out = []
    with local_redis() as url:
        client = redis.Redis.from_url(url, socket_timeout=600)
        for kind in ("stream", "hash"):
            for rows in SIZES:
                longest, wall = measure(client, kind, rows)
                rows_out.append([kind, rows, longest, longest * 1000 / rows, wall])
        client.flushall()
        client.close()
        job_rows = jobs_section(url)
    write(
        "sink_commit",
        "Transactional sink: the longest command of a commit (SLOWLOG)",
        [
            (
                "One batch, one commit",
                table(["target", "rows", "longest command ms", "us per row", "wall ms"], rows_out),
            ),
            (
                "The job: redis-stream -> lookup_join -> redis sink, transactional, local[2]",
                job_rows,
            ),
        ],
        notes=(
            "The commit script checks each staging list's length, then publishes every row "
            "(XADD, or DEL+HSET) and the marker in one script: read-committed (a reader "
            "never sees part of a batch) costs a pause proportional to the batch. The sink "
            "therefore refuses a batch of more than maxRowsPerCommit rows (5,000 by "
            "default), and the redis-stream source reads at most maxEntriesPerTrigger "
            "entries a micro-batch (5,000 by default): the job's table shows the longest "
            "command at the defaults, and what lifting both limits costs Redis and gains "
            "in rows/s (each micro-batch costs Spark about 0.3 s of its own bookkeeping on "
            "this machine: offsets and commit logs, planning, task launch). Target (issue "
            "18): no command over 50 ms at the defaults, whatever the backlog. "
            "In the job, Redis shares the two cores with Spark's JVM and Python workers: a "
            "5,000-row commit of these 6-field rows took 20 ms on an idle machine and 38-45 "
            "ms beside two busy processes (a trial outside this table), so the job's longest "
            "command moves from run to run and is not proportional to the batch.\n\n"
            "Rerun: `./scripts/dev bench sink_commit` (ENRICH_BENCH_COMMIT sets the sizes)."
        ),
    )


if __name__ == "__main__":
    main()
