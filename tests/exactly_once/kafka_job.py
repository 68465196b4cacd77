"""The streaming job the Kafka crash runs kill: kafka (3 partitions) -> lookup_join
(Redis) -> kafka-eos, as its own process (``python -m tests.exactly_once.kafka_job``).

Args: bootstrap, source topic, target topic, Redis URL, checkpoint, maxOffsetsPerTrigger,
``low`` (the low-latency profile: async progress tracking, runs until killed or told to
drain) or ``drain`` (Trigger.AvailableNow: ends once the source is read).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import DataFrame, SparkSession, functions as F

from connectors.redis import RedisLookup
from enrich.demo.kafka_broker import connector_jars
from enrich.spark import lookup_join, low_latency, register_data_sources, session
from enrich.spark.sink.kafka_eos import kafka_eos_writer


def read_orders(spark: SparkSession, bootstrap: str, source: str, limit: str) -> DataFrame:
    """The crash jobs' input: the topic from its start, ``limit`` offsets a micro-batch,
    each record's value the order id."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", limit)
        .load()
        .withColumn("order_id", F.col("value").cast("string").cast("long"))
    )


def main(bootstrap: str, source: str, target: str, url: str, checkpoint: str, limit: str,
         how: str) -> None:  # fmt: skip
    spark = session(
        "kafka-eos-crash",
        "local[2]",
        spark__ui__enabled="false",
        spark__sql__shuffle__partitions="2",
        spark__python__worker__reuse="true",
        spark__jars=",".join(str(j) for j in connector_jars()),
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    orders = read_orders(spark, bootstrap, source, limit)
    users = RedisLookup(url, key_template="user:{}", value="hash", schema="name string")
    joined = lookup_join(orders, users, on="order_id")
    value = F.to_json(F.struct("order_id", "name", "partition", "offset")).alias("value")
    out = joined.select("topic", "partition", "offset", "key", value)
    if how == "low":
        writer = low_latency(out, sink="kafka-eos", warm=False)
    else:
        writer = kafka_eos_writer(out).trigger(availableNow=True)
    query = (
        writer.option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    if how == "low":
        query.processAllAvailable()
        print("drained", flush=True)
        query.stop()
    else:
        query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main(*sys.argv[1:8])
