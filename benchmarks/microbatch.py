"""What one micro-batch costs, stage by stage: Spark's floor, a Python passthrough, the
source, the join, the sink.

Each query runs micro-batches of ``ROWS`` rows (the ``rate-micro-batch`` source's
``rowsPerBatch``, the ``redis-stream`` source's ``maxEntriesPerTrigger``) in one Spark
session on ``local[2]``, with the default trigger, until ``BATCHES`` batches after a first
one (its planning and its workers' start are not per-batch costs) have run, in
``ROUNDS`` rounds over all the queries (the machine's load drifts); the table gives the
median of their ``durationMs.triggerExecution`` and of ``addBatch`` (the
part that runs the batch's tasks and the sink's commit). The ``redis`` sink runs on
its defaults, transactional, into a stream.

Rerun: ``./scripts/dev bench microbatch`` (``ENRICH_BENCH_MICROBATCH_BATCHES=N``,
``ENRICH_BENCH_MICROBATCH_ROWS=N``, ``ENRICH_BENCH_MICROBATCH_ROUNDS=N``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import redis

from connectors.redis import RedisLookup
from enrich.demo.local import local_redis

from ._report import table, write
from ._streams import ORDER_SCHEMA, fill_stream
from .lookup import KEYS, load_users
from .spark import PARTITIONS, SCHEMA, start_spark

ROWS = int(os.environ.get("ENRICH_BENCH_MICROBATCH_ROWS", 5_000))
BATCHES = int(os.environ.get("ENRICH_BENCH_MICROBATCH_BATCHES", 10))
ROUNDS = int(os.environ.get("ENRICH_BENCH_MICROBATCH_ROUNDS", 5))
TIMEOUT = 600.0  # seconds a query may take for its batches
STREAM = "orders-mb"  # the redis-stream queries' backlog: enough entries for each

Build = Callable[[Any, str], Any]


def _rate(spark: Any, url: str) -> Any:
    from pyspark.sql import functions as F

    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS)
        .option("numPartitions", PARTITIONS)
        .load()
        .select(
            F.col("value").alias("order_id"),
            (F.col("value") % KEYS).alias("user_id"),
            (F.col("value") % 100 / 4).alias("amount"),
        )
    )


def _stream(spark: Any, url: str) -> Any:
    return (
        spark.readStream.format("redis-stream")
        .option("url", url)
        .option("stream", STREAM)
        .option("maxEntriesPerTrigger", str(ROWS))
        .schema(ORDER_SCHEMA)
        .load()
        .drop("stream_id")
    )


def _passthrough(df: Any, url: str) -> Any:
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    extra = ["name", "tier"]
    schema = StructType([*df.schema.fields, *(StructField(n, StringType()) for n in extra)])

    def append_nulls(batches: Any) -> Any:
        for batch in batches:
            nulls = pa.nulls(batch.num_rows, pa.string())
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, *(nulls for _ in extra)],
                names=[*batch.schema.names, *extra],
            )

    return df.mapInArrow(append_nulls, schema)


def _join(df: Any, url: str) -> Any:
    from enrich.spark import lookup_join

    users = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
    return lookup_join(df, users, on="user_id")


def _noop(df: Any, url: str, checkpoint: str) -> Any:
    return df.writeStream.format("noop").option("checkpointLocation", checkpoint)


def _sink(df: Any, url: str, checkpoint: str) -> Any:
    return (
        df.writeStream.format("redis")
        .option("url", url)
        .option("stream", "enriched")
        .option("checkpointLocation", checkpoint)
    )


# (label, source, stage or None, sink)
QUERIES: list[tuple[str, Build, Any, Any]] = [
    ("rate-micro-batch -> noop (Spark's own floor)", _rate, None, _noop),
    ("rate -> `mapInArrow` Arrow passthrough -> noop", _rate, _passthrough, _noop),
    ("rate -> `lookup_join` -> noop", _rate, _join, _noop),
    ("`redis-stream` -> noop", _stream, None, _noop),
    ("`redis-stream` -> `lookup_join` -> noop", _stream, _join, _noop),
    ("rate -> `redis` sink (transactional)", _rate, None, _sink),
    ("rate -> `lookup_join` -> `redis` sink (transactional)", _rate, _join, _sink),
    ("`redis-stream` -> `lookup_join` -> `redis` sink (transactional)", _stream, _join, _sink),
]


def _clear(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.delete("enriched")
    keys = list(client.scan_iter("enrich:sink:*", count=10_000))
    if keys:
        client.delete(*keys)
    client.close()


def run_query(
    spark: Any, url: str, source: Build, stage: Any, sink: Any, batches: int = BATCHES
) -> list[dict[str, float]]:
    """The ``durationMs`` of ``batches`` micro-batches after the first."""
    _clear(url)
    df = source(spark, url)
    if stage is not None:
        df = stage(df, url)
    with tempfile.TemporaryDirectory(prefix="enrich-bench-mb-") as checkpoint:
        query = sink(df, url, checkpoint).start()
        deadline = time.monotonic() + TIMEOUT
        try:
            while True:
                done = [p for p in query.recentProgress if p["numInputRows"]]
                if len(done) > batches or time.monotonic() > deadline:
                    break
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                time.sleep(0.1)
        finally:
            query.stop()
    runs = done[1 : batches + 1]
    if len(runs) < batches or any(p["numInputRows"] != ROWS for p in runs):
        raise RuntimeError(f"expected {batches} batches of {ROWS} rows: {done}")
    return [p["durationMs"] for p in runs]


def measure(spark: Any, url: str) -> tuple[list[list[Any]], list[list[float]]]:
    """One row per query (label, trigger ms, over the floor, addBatch ms), and each
    query's median trigger ms per round (the dimension keys already loaded). The queries
    run in ``ROUNDS`` rounds of ``BATCHES / ROUNDS`` batches each, so that a drift of
    the (shared) machine's load falls on every query alike, and a difference between
    two queries can be taken round by round."""
    fill_stream(url, ROWS * (BATCHES + 2 * ROUNDS), stream=STREAM)
    durations: list[list[dict[str, float]]] = [[] for _ in QUERIES]
    rounds: list[list[float]] = []
    for _ in range(ROUNDS):
        this_round = []
        for runs, (_label, source, stage, sink) in zip(durations, QUERIES, strict=True):
            got = run_query(spark, url, source, stage, sink, max(1, BATCHES // ROUNDS))
            runs += got
            this_round.append(statistics.median(d["triggerExecution"] for d in got))
        rounds.append(this_round)
    out: list[list[Any]] = []
    for runs, (label, *_) in zip(durations, QUERIES, strict=True):
        ms = {
            part: statistics.median(d.get(part, 0) for d in runs)
            for part in ("triggerExecution", "addBatch")
        }
        trigger = round(ms["triggerExecution"])
        floor = out[0][1] if out else trigger
        out.append([label, trigger, trigger - floor, round(ms["addBatch"])])
        print(f"microbatch: {label}: {ms}")
    return out, rounds


def main() -> None:
    from enrich.spark import register_data_sources

    spark = start_spark()
    register_data_sources(spark)
    try:
        with local_redis() as url:
            load_users(url)
            run_query(spark, url, _rate, _join, _sink)  # warm-up: workers, pools, JIT
            heading, body = section(spark, url)
    finally:
        spark.stop()
    write("microbatch", "What a micro-batch costs, stage by stage", [(heading, body)], notes=NOTES)


NOTES = (__doc__ or "").split("\n\n", 1)[1]


def section(spark: Any, url: str) -> tuple[str, str]:
    """The table, under a heading naming the machine's load average around the run."""
    before = os.getloadavg()[0]
    rows, rounds = measure(spark, url)
    after = os.getloadavg()[0]

    def paired(a: int, b: int) -> str:
        """Query a minus query b, the median over rounds, and the range."""
        diffs = sorted(r[a] - r[b] for r in rounds)
        return f"{statistics.median(diffs):.0f} ms ({diffs[0]:.0f} to {diffs[-1]:.0f})"

    ratios = sorted(r[7] / r[1] for r in rounds)
    headers = ["query", "ms per micro-batch", "over Spark's floor", "addBatch ms"]
    heading = (
        f"{ROWS:,} rows a micro-batch, medians of {BATCHES} batches in {ROUNDS} rounds, "
        f"local[{PARTITIONS}], load average {before:.1f} before, {after:.1f} after"
    )
    summary = (
        "\n\nRound by round (median over the rounds, range): the sink over noop "
        f"{paired(6, 2)} after rate -> `lookup_join`, {paired(7, 4)} after "
        f"`redis-stream` -> `lookup_join`; rate -> sink over Spark's floor {paired(5, 0)}; "
        "`redis-stream` -> `lookup_join` -> sink / rate -> passthrough -> noop "
        f"{statistics.median(ratios):.2f} ({ratios[0]:.2f} to {ratios[-1]:.2f})."
    )
    return heading, table(headers, rows) + summary


if __name__ == "__main__":
    main()
