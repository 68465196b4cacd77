"""The crash harness's streaming job, run with spark-submit: redis-stream -> lookup_join
against Redis -> a sink ("transactional", "idempotent", "file" or "low-latency"). Exits 0
once every entry present at start-up is processed. The transactional sinks commit in
steps of 15 rows, so a batch of 40 takes three (a kill can land between them); the sink
may write to a Redis of its own (a sixth argument: its URL); a seventh sets the source's
maxEntriesPerTrigger (40), so that a restart may cut the batches otherwise.

"low-latency" runs under :func:`enrich.spark.low_latency` (async progress tracking, the
sink keyed by each row's stream_id, a processing-time trigger): Spark writes its offset
and commit logs at most once a second, so a restart re-plans the batches after the last
offsets it wrote, cut otherwise. Async progress tracking refuses ``availableNow``: the
job stops its query once the sink's mark reaches the last entry present at start-up."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import redis

from connectors.redis import RedisLookup
from enrich import ExponentialBackoffRetry
from enrich.spark import lookup_join, low_latency, register_data_sources, session
from enrich.spark.sink.row_writes import SinkSettings
from enrich.spark.sink.two_phase import ONE_SOURCE, published_marks
from enrich.spark.streams.loss import parse_id

SCHEMA = "stream_id string, order_id long, user_id long, amount double"


STEP_ROWS = 15  # maxRowsPerCommit: three steps a batch of 40


def main(
    source_url: str,
    dim_url: str,
    sink: str,
    checkpoint: str,
    output: str,
    sink_url: str = "",
    max_entries: str = "40",
) -> None:
    spark = session(
        "exactly-once-job",
        "local[2]",
        spark__ui__enabled="false",
        spark__sql__shuffle__partitions="2",
        spark__python__worker__reuse="true",
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    orders = (
        spark.readStream.format("redis-stream")
        .option("url", source_url)
        .option("stream", "orders")
        .option("maxEntriesPerTrigger", int(max_entries))
        .schema(SCHEMA)
        .load()
    )
    users = RedisLookup(dim_url, key_template="user:{}", value="json",
                        schema="name string, tier string", timeout=1.0)  # fmt: skip
    # Retries ride out a short outage of the dimension store; past them the task fails
    # and the harness restarts the query from its checkpoint.
    retry = ExponentialBackoffRetry(10, 0.1, 1.0, 2.0)
    enriched = lookup_join(orders, users, on="user_id", timeout=15.0, retry=retry)
    if sink == "low-latency":
        run_low_latency(enriched, source_url, sink_url or source_url, checkpoint)
        spark.stop()
        return
    writer = enriched.drop("stream_id").writeStream.option("checkpointLocation", checkpoint)
    if sink == "file":
        writer = writer.format("json").option("path", output)
    else:
        writer = writer.format("redis").option("url", sink_url or source_url)
        writer = writer.option("mode", sink)
        if sink == "transactional":
            writer = writer.option("stream", "enriched").option("maxRowsPerCommit", STEP_ROWS)
        else:
            writer = writer.option("key", "enriched:{order_id}")
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()


def run_low_latency(enriched: Any, source_url: str, sink_url: str, checkpoint: str) -> None:
    options = {"url": sink_url, "stream": "enriched", "maxRowsPerCommit": str(STEP_ROWS),
               "checkpointLocation": checkpoint}  # fmt: skip
    interval = os.environ.get("ENRICH_TEST_ASYNC_INTERVAL_MS")
    if interval:  # Spark's logs further behind the sink: a kill leaves more to re-plan
        options["asyncProgressTrackingCheckpointIntervalMs"] = interval
    source, target = redis.Redis.from_url(source_url), redis.Redis.from_url(sink_url)
    newest = source.xrevrange("orders", count=1)
    last = parse_id(newest[0][0].decode()) if newest else (0, 0)
    identity = SinkSettings.of({**options, "sourceIdColumn": "stream_id"}).identity
    query = low_latency(enriched).options(**options).start()
    told: set[int] = set()
    while not query.awaitTermination(0.2):
        tell(query, told)
        # Done once the sink's mark is the last entry and a batch of this run got there
        # (its commit also removed what killed runs left in staging).
        mark = published_marks(target, identity).get(ONE_SOURCE)
        if mark is not None and parse_id(mark) >= last and reached(query, last):
            query.stop()
    tell(query, told)
    query.awaitTermination()  # raises what failed the query, if anything


def tell(query: Any, told: set[int]) -> None:
    """One ``BATCH <id> <rows> <start> <end>`` line per micro-batch with rows, in the job's
    log (what a killed run did; the harness counts what a restart re-plans from the
    checkpoint and the sink, see its ``replayed_entries``)."""
    for progress in query.recentProgress:
        if progress["batchId"] in told or not progress["numInputRows"]:
            continue
        told.add(progress["batchId"])
        source = progress["sources"][0]
        start = json.loads(source["startOffset"] or "{}").get("orders", "0-0")
        end = json.loads(source["endOffset"] or "{}").get("orders", "0-0")
        print(f"BATCH {progress['batchId']} {progress['numInputRows']} {start} {end}", flush=True)


def reached(query: Any, last: tuple[int, int]) -> bool:
    """Whether a micro-batch of this run read up to entry ``last``."""
    for progress in query.recentProgress:
        for source in progress["sources"]:
            end = json.loads(source["endOffset"] or "{}").get("orders")
            if progress["numInputRows"] and end and parse_id(end) >= last:
                return True
    return False


if __name__ == "__main__":
    main(*sys.argv[1:8])
