"""How long the transactional sink's commit blocks Redis: the longest command, by SLOWLOG.

A Lua script runs alone on the server: its duration is everyone's pause. The commit
publishes a batch in steps of at most ``maxRowsPerCommit`` rows (1,000 by default), one
script each; ``atomicCommit=true`` publishes it in one script. This stages ``N`` rows (4
columns, encoded by the sink's own codec) in one staging list, as the executors do, runs
the real commit (:func:`enrich.spark.sink.redis.two_phase.commit`) both ways, and reads the longest
command from ``SLOWLOG`` (threshold 0: every command logged), for a stream target and a
hash target. Sizes: ``ENRICH_BENCH_COMMIT="10000,100000,1000000"`` (the default).

Then the job itself at its defaults: a backlog of ``N`` entries in a stream, read by the
``redis-stream`` source, enriched by ``lookup_join`` and written by the ``redis`` sink in
mode transactional (``Trigger.AvailableNow``, local[2], every option at its default:
micro-batches of all that is available, commits in steps of 1,000 rows), with the
longest command Redis ran meanwhile from ``SLOWLOG``, whoever sent it (the source's
reads, the lookups, the staging, the commits); and, beside it at the middle size, the
same job with ``atomicCommit=true`` and with the source bounded to 5,000 entries a
micro-batch (the defaults before the steps).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import redis

from connectors.redis import RedisLookup
from enrich.demo.local import local_redis
from enrich.spark.sink.redis import two_phase as redis_commit
from enrich.spark.sink.redis.codec import pack
from enrich.spark.sink.redis.row_writes import STEP_ROWS

from ._report import table, write
from ._streams import ORDER_SCHEMA, STREAM, fill_stream
from .lookup import load_users
from .spark import SCHEMA, start_spark

SIZES = [int(n) for n in os.environ.get("ENRICH_BENCH_COMMIT", "10000,100000,1000000").split(",")]
STAGE_CHUNK = 5000
# The job's settings beside the defaults, at the middle size.
TRADE_OFF: tuple[dict[str, str], ...] = (
    {"atomicCommit": "true"},
    {"maxEntriesPerTrigger": "5000"},
)
IDENTITY = "bench"


def _op(kind: str, i: int) -> bytes:
    fields = ["order_id", str(i), "user_id", str(i % 1000), "amount", "12.5", "tier", "gold"]
    if kind == "stream":
        return pack(["x", "bench:out", *fields])
    return pack(["h", f"bench:order:{i}", *fields])


def measure(client: redis.Redis, kind: str, rows: int, step: int | None) -> tuple[float, float]:
    """(longest command in ms, wall time of the commit in ms); ``step``: rows a script
    (None: one script, as ``atomicCommit``)."""
    client.flushall()
    staging = redis_commit.staging_key(IDENTITY, "1", 0, "a")
    client.sadd(redis_commit.index_key(IDENTITY), staging)
    for start in range(0, rows, STAGE_CHUNK):
        client.rpush(staging, *(_op(kind, i) for i in range(start, min(rows, start + STAGE_CHUNK))))
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1024)
    client.slowlog_reset()
    began = time.perf_counter()
    redis_commit.commit(client, IDENTITY, "1", [(staging, rows)], marked=True, step=step)
    wall = (time.perf_counter() - began) * 1000
    longest = max(entry["duration"] for entry in client.slowlog_get(1024)) / 1000
    return longest, wall


def pipeline(spark: Any, url: str, rows: int, options: dict[str, str]) -> list[Any]:
    """The job over a backlog of ``rows`` entries: [batches, longest command ms, rows/s].
    ``options``: set on the source or the sink, whichever reads them ({}: the defaults)."""
    from enrich.spark import lookup_join

    client = redis.Redis.from_url(url, socket_timeout=600)
    for key in ("enriched", *client.scan_iter("enrich:sink:*", count=10_000)):
        client.delete(key)
    fill_stream(url, rows)
    client.config_set("slowlog-log-slower-than", 1000)  # commands of 1 ms and more
    client.slowlog_reset()
    users = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
    source = spark.readStream.format("redis-stream").option("url", url).option("stream", STREAM)
    if "maxEntriesPerTrigger" in options:
        source = source.option("maxEntriesPerTrigger", options["maxEntriesPerTrigger"])
    enriched = lookup_join(source.schema(ORDER_SCHEMA).load(), users, on="user_id")
    with tempfile.TemporaryDirectory(prefix="enrich-bench-") as checkpoint:
        writer = (
            enriched.drop("stream_id")
            .writeStream.format("redis")
            .option("url", url)
            .option("stream", "enriched")
            .option("checkpointLocation", checkpoint)
        )
        for name, value in options.items():
            if name != "maxEntriesPerTrigger":
                writer = writer.option(name, value)
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


def batch_write(spark: Any, url: str, rows: int) -> list[Any]:
    """``df.write`` of ``rows`` rows to a stream, every option at its default:
    [rows, scripts run, longest command ms, rows/s]; each row must land once."""
    client = redis.Redis.from_url(url, socket_timeout=600)
    client.delete("written")
    client.config_set("slowlog-log-slower-than", 1000)
    client.slowlog_reset()
    client.config_resetstat()
    df = spark.range(rows).withColumnRenamed("id", "order_id")
    started = time.perf_counter()
    df.write.format("redis").option("url", url).option("stream", "written").mode("append").save()
    elapsed = time.perf_counter() - started
    scripts = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    longest = max((e["duration"] for e in client.slowlog_get(10_000)), default=0) / 1000
    seen = bytearray(rows)
    after = "-"
    while page := client.xrange("written", after, "+", count=100_000):
        for _, fields in page:
            seen[int(fields[b"order_id"])] += 1
        after = "(" + page[-1][0].decode()
    client.delete("written")
    client.close()
    if seen.count(1) != rows:
        raise RuntimeError(f"{seen.count(1)} of {rows} rows landed exactly once")
    return [rows, scripts, longest, rows / elapsed]


def jobs_section(url: str) -> tuple[str, str]:
    from enrich.spark import register_data_sources

    spark = start_spark()
    register_data_sources(spark)
    out = []
    try:
        load_users(url)
        pipeline(spark, url, 20_000, {})  # warm-up: workers, pools
        runs: list[tuple[int, dict[str, str]]] = [(rows, {}) for rows in SIZES]
        middle = SIZES[len(SIZES) // 2]
        runs += [(middle, options) for options in TRADE_OFF]
        for rows, options in runs:
            batches, longest, rate = pipeline(spark, url, rows, options)
            limits = (
                ", ".join(f"{k}={v}" for k, v in options.items())
                or f"defaults (steps of {STEP_ROWS:,} rows)"
            )
            out.append([rows, limits, batches, longest, rate])
            print(f"sink_commit job: {rows:,} {limits}: {longest:.1f} ms, {rate:,.0f}/s")
        writes = [batch_write(spark, url, rows) for rows in SIZES]
        for row in writes:
            print(f"sink_commit df.write: {row[0]:,} rows, {row[1]} scripts, {row[2]:.1f} ms")
    finally:
        spark.stop()
    headers = ["backlog", "settings", "batches", "longest command ms", "rows/s"]
    write_headers = ["rows", "scripts (EVALSHA)", "longest command ms", "rows/s"]
    return table(headers, out), table(write_headers, writes)


def main() -> None:
    rows_out = []
    with local_redis() as url:
        client = redis.Redis.from_url(url, socket_timeout=600)
        for kind in ("stream", "hash"):
            for rows in SIZES:
                for step in (STEP_ROWS, None):
                    longest, wall = measure(client, kind, rows, step)
                    how = f"steps of {step:,}" if step else "one script (atomicCommit)"
                    rows_out.append([kind, rows, how, longest, wall])
        client.flushall()
        client.close()
        job_rows, write_rows = jobs_section(url)
    write(
        "sink_commit",
        "Transactional sink: the longest command of a commit (SLOWLOG)",
        [
            (
                "One batch, one commit",
                table(["target", "rows", "commit", "longest command ms", "wall ms"], rows_out),
            ),
            (
                "The job: redis-stream -> lookup_join -> redis sink, transactional, local[2]",
                job_rows,
            ),
            (
                "A batch df.write to a stream on the defaults (each row checked to land once)",
                write_rows,
            ),
        ],
        notes=(
            "A commit step checks the staging lists still ahead of its cursor, publishes "
            "at most maxRowsPerCommit rows (XADD, or DEL+HSET) and moves the cursor in one "
            "script; the last step sets the marker. atomicCommit=true publishes the batch "
            "and the marker in one script: whole-batch visibility for a pause that grows "
            "with the batch. The job's table shows the longest command at the defaults "
            "(the source unbounded, the commit in steps), and beside it atomicCommit and a "
            "source bounded to 5,000 entries a micro-batch (each micro-batch costs Spark "
            "about 0.2-0.3 s of its own bookkeeping on this machine: offsets and commit "
            "logs, planning, task launch). Target (issue 23): no command over 50 ms at the "
            "defaults, whatever the backlog. "
            "In the job, Redis shares the two cores with Spark's JVM and Python workers: a "
            "5,000-row commit of these 6-field rows took 20 ms on an idle machine and 38-45 "
            "ms beside two busy processes (a trial outside this table), so the job's longest "
            "command moves from run to run and is not proportional to the batch.\n\n"
            "Rerun: `./scripts/dev bench sink_commit` (ENRICH_BENCH_COMMIT sets the sizes)."
        ),
    )


if __name__ == "__main__":
    main()
