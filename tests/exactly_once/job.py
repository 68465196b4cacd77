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
job stops its query once the sink's mark reaches the last entry present at start-up.

"kafka-low-latency" is the same profile reading Spark's ``kafka`` source (the first
argument is then the broker's ``host:port``, the topic ``orders``; the sixth argument's
limit is its ``maxOffsetsPerTrigger``): the sink keys each record by (topic, partition)
and offset, and the job stops once every partition's mark reaches the partition's last
offset at start-up."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import redis

from connectors.redis import RedisLookup
from enrich import ExponentialBackoffRetry
from enrich.spark import lookup_join, low_latency, register_data_sources, session
from enrich.spark.sink.redis.row_writes import SinkSettings
from enrich.spark.sink.redis.two_phase import ONE_SOURCE, published_marks
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
    users = RedisLookup(dim_url, key_template="user:{}", value="json",
                        schema="name string, tier string", timeout=1.0)  # fmt: skip
    retry = ExponentialBackoffRetry(10, 0.1, 1.0, 2.0)
    if sink == "kafka-low-latency":
        records = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", source_url)
            .option("subscribe", "orders")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", int(max_entries))
            .load()
            .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS v")
            .selectExpr(
                "topic", "partition", "offset",
                "CAST(get_json_object(v, '$.order_id') AS BIGINT) AS order_id",
                "CAST(get_json_object(v, '$.user_id') AS BIGINT) AS user_id",
                "CAST(get_json_object(v, '$.amount') AS DOUBLE) AS amount",
            )
        )  # fmt: skip
        enriched = lookup_join(records, users, on="user_id", timeout=15.0, retry=retry)
        run_kafka_low_latency(enriched, source_url, sink_url, checkpoint)
        spark.stop()
        return
    orders = (
        spark.readStream.format("redis-stream")
        .option("url", source_url)
        .option("stream", "orders")
        .option("maxEntriesPerTrigger", int(max_entries))
        .schema(SCHEMA)
        .load()
    )
    # Retries ride out a short outage of the dimension store; past them the task fails
    # and the harness restarts the query from its checkpoint.
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
    publish_from = os.environ.get("ENRICH_TEST_PUBLISH_FROM") or "driver"
    query = low_latency(enriched, publish_from=publish_from).options(**options).start()
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


def run_kafka_low_latency(enriched: Any, bootstrap: str, sink_url: str, checkpoint: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    options = {"url": sink_url, "stream": "enriched", "maxRowsPerCommit": str(STEP_ROWS),
               "checkpointLocation": checkpoint}  # fmt: skip
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    partitions = consumer.list_topics("orders", timeout=30).topics["orders"].partitions
    ends = {}
    for p in partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition("orders", p), timeout=30)
        if high > 0:
            ends[f"orders/{p}"] = high - 1  # the last offset present at start-up
    consumer.close()
    identity = SinkSettings.of(
        {**options, "sourceIdColumn": "offset", "sourceStreamColumn": "topic,partition"}
    ).identity
    target = redis.Redis.from_url(sink_url)
    publish_from = os.environ.get("ENRICH_TEST_PUBLISH_FROM") or "driver"
    query = low_latency(enriched, publish_from=publish_from).options(**options).start()
    told: set[int] = set()
    while not query.awaitTermination(0.2):
        for progress in query.recentProgress:
            if progress["batchId"] not in told and progress["numInputRows"]:
                told.add(progress["batchId"])
                print(f"BATCH {progress['batchId']} {progress['numInputRows']}", flush=True)
        marks = published_marks(target, identity)
        done = all(int(marks.get(s, -1)) >= end for s, end in ends.items())
        # A batch of this run got there (its commit also removed what killed runs left
        # in staging), or there is nothing left to read: Spark's logs caught up with
        # the sink before the kill, and an idle query's progress shows the source at
        # its end (what staging a killed run left is then the harness's to find).
        ran = any(p["numInputRows"] for p in query.recentProgress)
        if done and (ran or kafka_at_end(query, ends)):
            query.stop()
    query.awaitTermination()


def kafka_at_end(query: Any, ends: dict[str, int]) -> bool:
    """Whether a progress of ``query`` shows topic ``orders`` read past ``ends``."""
    for progress in query.recentProgress:
        for source in progress["sources"]:
            read = json.loads(source["endOffset"] or "{}").get("orders", {})
            if all(int(read.get(s.rsplit("/", 1)[1], 0)) > end for s, end in ends.items()):
                return True
    return False


def tell(query: Any, told: set[int]) -> None:
    """One ``BATCH <id> <rows> <start> <end>`` line per micro-batch with rows, in the job's
    log (what a killed run did; the harness counts what a restart re-plans from the
    checkpoint and the sink, see its ``replayed_entries``)."""
    for progress in query.recentProgress:
        if progress["batchId"] in told or not progress["numInputRows"]:
            continue
        told.add(progress["batchId"])
        source = progress["sources"][0]
        # A first batch's startOffset is the JSON text "null" (no offset yet), not None.
        start = (json.loads(source["startOffset"] or "null") or {}).get("orders", "0-0")
        end = (json.loads(source["endOffset"] or "null") or {}).get("orders", "0-0")
        print(f"BATCH {progress['batchId']} {progress['numInputRows']} {start} {end}", flush=True)


def reached(query: Any, last: tuple[int, int]) -> bool:
    """Whether a micro-batch of this run read up to entry ``last``."""
    for progress in query.recentProgress:
        for source in progress["sources"]:
            end = (json.loads(source["endOffset"] or "null") or {}).get("orders")
            if progress["numInputRows"] and end and parse_id(end) >= last:
                return True
    return False


if __name__ == "__main__":
    main(*sys.argv[1:8])
