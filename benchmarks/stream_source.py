"""The ``redis-stream`` source alone: one stream read in one partition against the
default split (``partitionsPerStream`` = the session's parallelism), side by side.

``ENTRIES`` entries of three fields (``order_id``, ``user_id``, ``amount``) are added to
one stream with auto ids (pipelined, so they span a few seconds of ids), then read, typed
by a schema, into Spark's ``noop`` sink: as a batch read, and as a streaming query with
``Trigger.AvailableNow`` and a fresh checkpoint. The two settings alternate round by
round and the best round of each counts (the machine is shared). Before Spark starts,
one partition's Python work is compared in this process: the rows the source yielded
before it built Arrow batches (with pyspark's conversion of each row) against the page
batches it yields now.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import redis

from enrich.demo.local import local_redis

from ._report import table, write
from .spark import PARTITIONS, start_spark

ENTRIES = int(os.environ.get("ENRICH_BENCH_STREAM_ENTRIES", 300_000))
REPEAT = 5
SCHEMA = "stream_id string, order_id long, user_id long, amount double"


def fill(url: str) -> None:
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for i in range(ENTRIES):
        pipe.xadd("orders", {"order_id": i, "user_id": i % 100_000, "amount": f"{i % 1000}.5"})
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    assert client.xlen("orders") == ENTRIES
    client.close()


def batch_read(spark: Any, url: str, parts: int | None) -> float:
    reader = spark.read.format("redis-stream").option("url", url).option("stream", "orders")
    if parts is not None:
        reader = reader.option("partitionsPerStream", parts)
    start = time.perf_counter()
    reader.schema(SCHEMA).load().write.format("noop").mode("overwrite").save()
    return ENTRIES / (time.perf_counter() - start)


def stream_read(spark: Any, url: str, parts: int | None) -> float:
    reader = spark.readStream.format("redis-stream").option("url", url).option("stream", "orders")
    if parts is not None:
        reader = reader.option("partitionsPerStream", parts)
    with tempfile.TemporaryDirectory(prefix="enrich-bench-ck-") as checkpoint:
        start = time.perf_counter()
        query = (
            reader.schema(SCHEMA)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        elapsed = time.perf_counter() - start
        rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows == ENTRIES, rows
    return ENTRIES / elapsed


READS = (("batch read", batch_read), ("streaming, AvailableNow", stream_read))


def lanes(url: str) -> list[list[Any]] | None:
    """One partition's Python work in this process, the whole stream in XRANGE pages:
    rows as the source yielded them before 2026-11-25 (redis-py's dict per entry, the
    decoder's tuple, pyspark's conversion of each row to Arrow) against the page batches
    it yields now (:mod:`enrich.spark.streams.page_batches`). Best of ``REPEAT``, alternating;
    None when this pyspark has no row converter to compare with."""
    try:
        from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches
    except ImportError:  # pragma: no cover - other pyspark
        return None
    from pyspark.sql.types import StructType

    from enrich.spark.streams.fields import EntryDecoder
    from enrich.spark.streams.page_batches import PageBatches, arrow_conversion
    from enrich.spark.streams.read import PAGE

    schema = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {}}
                for n, t in (
                    ("stream_id", "string"),
                    ("order_id", "long"),
                    ("user_id", "long"),
                    ("amount", "double"),
                )
            ],
        }
    )
    conversion = arrow_conversion(schema)
    assert conversion is not None

    class Source:
        def name(self) -> str:
            return "redis-stream"

    def pages(client: Any) -> Iterator[Any]:
        after = "-"
        while True:
            page = client.xrange("orders", after, "+", count=PAGE)
            yield page
            if len(page) < PAGE:
                return
            last = page[-1][0]
            after = "(" + (last.decode() if isinstance(last, bytes) else str(last))

    def rows() -> int:
        client = redis.Redis.from_url(url)
        decoder = EntryDecoder(schema)
        out = (decoder.row(i, f) for page in pages(client) for i, f in page)
        n = sum(b.num_rows for b in records_to_arrow_batches(out, 10_000, schema, Source()))
        client.close()
        return n

    def batches() -> int:
        client = redis.Redis.from_url(url)
        client.set_response_callback("XRANGE", lambda response, **_: response)
        lane = PageBatches(EntryDecoder(schema), schema, conversion)
        n = sum(lane.batch(page).num_rows for page in pages(client) if page)
        client.close()
        return n

    best = {"rows": float("inf"), "batches": float("inf")}
    for _ in range(REPEAT):
        for name, run in (("rows", rows), ("batches", batches)):
            started = time.perf_counter()
            assert run() == ENTRIES
            best[name] = min(best[name], time.perf_counter() - started)
    per = {k: v / ENTRIES * 1e6 for k, v in best.items()}
    return [
        ["rows: redis-py's dict, the decoder's tuple, pyspark's row -> Arrow", per["rows"], 1.0],
        ["page batches: XRANGE's raw reply, a column at a time", per["batches"],
         per["rows"] / per["batches"]],
    ]  # fmt: skip


def main() -> None:
    load_before = os.getloadavg()[0]
    spark = start_spark()
    from enrich.spark import register_data_sources

    register_data_sources(spark)
    best: dict[tuple[str, str], float] = {}
    try:
        with local_redis() as url:
            fill(url)
            in_process = lanes(url)
            batch_read(spark, url, 1)  # warm-up: workers, imports
            for _ in range(REPEAT):
                for kind, run in (
                    ("batch read", batch_read),
                    ("streaming, AvailableNow", stream_read),
                ):
                    for label, parts in (("1 partition", 1), (f"default ({PARTITIONS})", None)):
                        rate = run(spark, url, parts)
                        best[(kind, label)] = max(best.get((kind, label), 0.0), rate)
                        print(f"{kind}, {label}: {rate:,.0f} entries/s")
    finally:
        spark.stop()
    rows: list[list[Any]] = []
    for kind in ("batch read", "streaming, AvailableNow"):
        one = best[(kind, "1 partition")]
        split = best[(kind, f"default ({PARTITIONS})")]
        rows.append([kind, one, split, f"{split / one:.2f}x"])
    write(
        "stream_source",
        "redis-stream source: one partition against the default split",
        [
            (
                f"{ENTRIES:,} entries, one stream, local[{PARTITIONS}], schema-typed, noop sink, "
                f"best of {REPEAT}",
                table(["read", "1 partition (rows/s)", "default split (rows/s)", "ratio"], rows),
            ),
            *(
                []
                if in_process is None
                else [
                    (
                        f"One partition's Python work in one process, {ENTRIES:,} entries in "
                        f"XRANGE pages, best of {REPEAT}",
                        table(["what the source yields", "us per entry", "speed-up"], in_process),
                    )
                ]
            ),
        ],
        notes=(
            "Target (issue 18): >= 1.8x one partition. A split can only pay when a second "
            "core is free: the 1-minute load average was "
            f"{load_before:.1f} when this run began and {os.getloadavg()[0]:.1f} when it "
            f"ended, on {os.cpu_count()} CPUs.\n"
            "Rerun: `python -m benchmarks stream_source` "
            "(`ENRICH_BENCH_STREAM_ENTRIES=N` changes the size)."
        ),
    )


if __name__ == "__main__":
    main()
