"""The ``kafka-eos`` sink on local Spark and a real broker: kafka -> lookup_join ->
kafka-eos over a topic of 3 partitions, and a ``read_committed`` consumer finds every
source record's row exactly once, across a replayed batch and a restart whose batches
are cut anew; the query shapes it cannot keep exactly once are refused before any
batch runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession, functions as F

from enrich.demo.kafka_broker import KafkaBroker
from enrich.spark import register_data_sources
from enrich.spark.sink.kafka_eos import (
    MissingOption,
    SourceNotKeyed,
    SourcePartitionSplit,
    StatefulQuery,
    kafka_eos_writer,
    kafka_sink_statistics,
)
from tests.support.kafka_fixtures import create_topic, produce
from tests.support.kafka_reading import read_all
from tests.support.spark_version import requires_spark

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    requires_spark(4, 2, "Spark's Kafka connector jars (4.2.0) and the Arrow stream writer"),
]


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


def orders(spark: SparkSession, bootstrap: str, topic: str, **options: Any) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    return reader.options(**{k: str(v) for k, v in options.items()}).load()


def enriched(df: Any, url: str) -> Any:
    """Each order joined with its user; the value written is JSON of both, and the
    source columns (topic, partition, offset) stay for the sink."""
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join

    users = RedisLookup(url, key_template="user:{}", value="hash", schema="name string")
    df = df.withColumn("order_id", F.col("value").cast("string").cast("long"))
    joined = lookup_join(df, users, on="order_id")
    value = F.to_json(F.struct("order_id", "name", "partition", "offset")).alias("value")
    return joined.select("topic", "partition", "offset", "key", value)


def found(bootstrap: str, topic: str) -> list[int]:
    return sorted(json.loads(v)["order_id"] for v in read_all(bootstrap, topic))


def _load(bootstrap: str, redis_client: redis.Redis, source: str, start: int, end: int) -> None:
    for i in range(start, end):
        redis_client.hset(f"user:{i}", "name", f"u{i}")
    produce(bootstrap, source, [str(i).encode() for i in range(start, end)])


def test_a_replayed_batch_and_a_re_cut_restart_write_each_record_once(
    spark_sources: SparkSession,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    redis_server: Any,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    """Run 1 writes 300 records in batches of 40. Its checkpoint then loses the commit of
    batch 1 (replayed as it was) and everything after (planned again): run 2, in
    batches of 70, reads those records again (skipped: written before) and 100 new ones."""
    bootstrap, source, out = kafka_broker.bootstrap, kafka_topic, f"{kafka_topic}-out"
    create_topic(bootstrap, source, partitions=3)
    create_topic(bootstrap, out, partitions=3)
    _load(bootstrap, redis_client, source, 0, 300)
    checkpoint = tmp_path / "ck"

    def run(limit: int) -> Any:
        df = enriched(
            orders(spark_sources, bootstrap, source, maxOffsetsPerTrigger=limit), redis_server.url
        )
        query = (
            kafka_eos_writer(df)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return query

    first = run(40)
    sizes = [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]]
    # maxOffsetsPerTrigger bounds a batch, up to Spark's rounding: it shares the limit out
    # by each partition's backlog and rounds a share below 1 up to 1 (a small partition
    # is not starved), so a batch of 3 partitions may hold up to 2 records more.
    assert len(sizes) > 5 and max(sizes) <= 40 + 2 and sum(sizes) == 300
    assert found(bootstrap, out) == list(range(300))
    for log in ("offsets", "commits"):
        for entry in (checkpoint / log).iterdir():  # a log file and its ".N.crc" checksum
            number = entry.name.removeprefix(".").removesuffix(".crc")
            if number.isdigit() and (int(number) > 1 or (log == "commits" and int(number) == 1)):
                entry.unlink()
    _load(bootstrap, redis_client, source, 300, 400)
    before = kafka_sink_statistics(out)
    second = run(70)
    read = [p["numInputRows"] for p in second.recentProgress if p["numInputRows"]]
    again = 300 - sizes[0]
    assert read[0] == sizes[1] and sum(read) == again + 100  # batch 1 as it was, then on
    assert max(read) > 40  # cut anew: batches of up to 70
    assert found(bootstrap, out) == list(range(400))  # none lost, none twice
    counts = kafka_sink_statistics(out)
    assert counts.records - before.records == 100
    assert counts.skipped - before.skipped == again


def test_unsafe_query_shapes_are_refused_before_any_batch(
    spark_sources: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, redis_server: Any
) -> None:
    bootstrap = kafka_broker.bootstrap
    kafka = orders(spark_sources, bootstrap, kafka_topic)
    with pytest.raises(SourceNotKeyed, match="reads rate"):
        kafka_eos_writer(spark_sources.readStream.format("rate").load())
    with pytest.raises(StatefulQuery, match="an aggregation"):
        kafka_eos_writer(kafka.groupBy("partition").count())
    with pytest.raises(StatefulQuery, match="deduplication"):
        kafka_eos_writer(kafka.dropDuplicates(["value"]))
    with pytest.raises(SourcePartitionSplit, match="repartition"):
        kafka_eos_writer(kafka.repartition(4))
    with pytest.raises(SourcePartitionSplit, match="minPartitions"):
        kafka_eos_writer(orders(spark_sources, bootstrap, kafka_topic, minPartitions=6))
    stream = (
        spark_sources.readStream.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "s")
        .schema("stream_id string, v long")
        .load()
    )
    with pytest.raises(SourcePartitionSplit, match="partitionsPerStream"):
        kafka_eos_writer(stream)
    one = (
        spark_sources.readStream.format("redis-stream")
        .option("url", redis_server.url)
        .option("stream", "s")
        .option("partitionsPerStream", 1)
        .schema("stream_id string, v long")
        .load()
    )
    kafka_eos_writer(one)  # one task per stream: accepted


def test_the_sink_refuses_rows_and_options_it_cannot_key(
    spark_sources: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    """A bare writeStream.format("kafka-eos") has no plan check, but the sink still
    refuses before its first batch writes: missing options, rows without their source
    record, complete mode."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, kafka_topic)
    produce(bootstrap, kafka_topic, [b"1"])
    base = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": "x",
        "checkpointLocation": str(tmp_path / "a"),
    }
    kafka = orders(spark_sources, bootstrap, kafka_topic)
    rate = spark_sources.readStream.format("rate").load().select(F.col("value").cast("string"))
    cases = [
        (kafka, {k: v for k, v in base.items() if k != "topic"}, "append", MissingOption, "topic"),
        (rate.withColumn("x", F.lit("")), base, "append", SourceNotKeyed, "partition and offset"),
        (kafka.drop("offset"), base, "append", SourceNotKeyed, "stream_id"),
        (kafka.groupBy("topic", "partition", "offset").agg(F.max("value").alias("value")), base,
         "complete", StatefulQuery, "append only"),
    ]  # fmt: skip
    for n, (df, options, mode, error, text) in enumerate(cases):
        options = {**options, "checkpointLocation": str(tmp_path / f"ck{n}")}
        with pytest.raises(Exception, match=error.__name__) as caught:
            query = df.writeStream.format("kafka-eos").options(**options).outputMode(mode).start()
            try:
                query.processAllAvailable()
            finally:
                query.stop()
        assert text in str(caught.value)


def test_under_the_low_latency_profile_each_record_is_written_once(
    spark_sources: SparkSession,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    redis_server: Any,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    """low_latency(sink="kafka-eos"): async progress tracking (the override Spark asks of
    a sink it does not know), a trigger of 0; then a restart from the checkpoint it left
    (behind the sink, as the profile leaves it) writes nothing twice."""
    from enrich.spark import low_latency

    bootstrap, source, out = kafka_broker.bootstrap, kafka_topic, f"{kafka_topic}-out"
    create_topic(bootstrap, source, partitions=3)
    create_topic(bootstrap, out, partitions=3)
    _load(bootstrap, redis_client, source, 0, 200)
    for run in range(2):
        df = orders(spark_sources, bootstrap, source, maxOffsetsPerTrigger=50)
        query = (
            low_latency(enriched(df, redis_server.url), sink="kafka-eos", warm=False)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )
        try:
            query.processAllAvailable()
            assert query.lastProgress is not None
        finally:
            query.stop()
        if run == 0:
            _load(bootstrap, redis_client, source, 200, 260)
    assert found(bootstrap, out) == list(range(260))


def test_a_source_partition_split_over_tasks_stops_the_query_by_name(
    spark_sources: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    """Without kafka_eos_writer's check, a repartition spreads one Kafka partition over
    several tasks: the batch's commit finds it and fails the query, naming the error; or,
    when those tasks run at once, they fence each other first (they share the partition's
    transactional id) and the task's error names the split as a cause."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, kafka_topic, partitions=1)
    produce(bootstrap, kafka_topic, [str(i).encode() for i in range(200)], partition=0)
    df = orders(spark_sources, bootstrap, kafka_topic).repartition(4)
    query = (
        df.writeStream.format("kafka-eos")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", f"{kafka_topic}-out")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    named = "SourcePartitionSplit|ProducerFenced.*split over several tasks"
    with pytest.raises(Exception, match=named) as caught:
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    assert f"{kafka_topic}/0" in str(caught.value)
