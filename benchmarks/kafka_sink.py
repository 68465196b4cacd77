"""The ``kafka-eos`` sink beside Spark's own (at-least-once) Kafka sink, on one query and
one data set, in one run; and a hand-written transactional producer loop (no Spark).

``ROWS`` records (~60-byte JSON values) in a source topic of 3 partitions on the
project's one-node broker (loopback). Each Spark round runs ``kafka -> select ->
sink`` with ``Trigger.AvailableNow`` and ``maxOffsetsPerTrigger=BATCH`` into a fresh
target topic, on ``local[2]``, query start included; the sinks alternate, ``ROUNDS``
rounds each, the best round counts. No lookup join: it would cost both sinks the same
and hide the sinks' difference. The hand-written loop reads the source with a
``read_committed`` consumer and writes each batch of ``BATCH`` records to the target in
one transaction with ``send_offsets_to_transaction`` (Kafka Streams' way), in this
process.

Target (issue 44): the sink >= 0.7x Spark's Kafka sink. ``ENRICH_BENCH_KAFKA_ROWS=N``
changes the size.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ._report import table, write
from .spark import start_spark

ROWS = int(os.environ.get("ENRICH_BENCH_KAFKA_ROWS", 150_000))
BATCH = 50_000
ROUNDS = 2


def _spark_round(spark: Any, bootstrap: str, source: str, sink: str, folder: Path) -> float:
    from enrich.spark import register_data_sources

    register_data_sources(spark)
    target = f"out-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, target)
    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", BATCH)
        .load()
    )
    if sink == "kafka":  # Spark's sink would take topic and partition columns as targets
        df, fmt = df.select("key", "value"), "kafka"
    else:
        df, fmt = df.select("topic", "partition", "offset", "key", "value"), "kafka-eos"
    started = time.perf_counter()
    query = (
        df.writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(folder / uuid.uuid4().hex))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - started


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the result
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)


def _hand_loop(bootstrap: str, source: str) -> float:
    """Consume-transform-produce by hand: a transaction per ``BATCH`` records, the
    consumer's offsets committed inside it."""
    from confluent_kafka import Consumer, Producer

    target = f"hand-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, target)
    group = f"hand-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": group, "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe([source])
    done = 0
    while done < ROWS:
        producer.begin_transaction()
        n = 0
        while n < BATCH and done + n < ROWS:
            for message in consumer.consume(5000, 1.0):
                if message.error() is None:
                    while True:
                        try:
                            producer.produce(target, message.value(), message.key())
                            break
                        except BufferError:
                            producer.poll(0.05)
                    n += 1
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
        )
        producer.commit_transaction(60)
        done += n
    consumer.close()
    return time.perf_counter() - started


def main() -> None:
    from confluent_kafka import Producer

    from enrich.demo.kafka_broker import KafkaBroker, connector_jars

    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--jars {','.join(str(j) for j in connector_jars())} pyspark-shell"
    )
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as folder:
        broker = KafkaBroker(Path(folder) / "broker").start()
        try:
            bootstrap, source = broker.bootstrap, "orders"
            _create(bootstrap, source)
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
            for i in range(ROWS):
                value = f'{{"order_id": {i}, "user_id": {i % 1000}, "amount": 12.5}}'
                while True:
                    try:
                        producer.produce(source, value.encode(), str(i).encode())
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.flush(60)
            spark = start_spark()
            times: dict[str, list[float]] = {"kafka": [], "kafka-eos": []}
            for _ in range(ROUNDS):
                for sink in times:
                    times[sink].append(_spark_round(spark, bootstrap, source, sink, Path(folder)))
            hand = _hand_loop(bootstrap, source)
            spark.stop()
        finally:
            broker.stop()
    best = {sink: min(t) for sink, t in times.items()}
    rows = [
        [sink, f"{', '.join(f'{t:.1f}' for t in times[sink])}", ROWS / best[sink]] for sink in times
    ]
    rows.append(["hand-written transactional loop (no Spark)", f"{hand:.1f}", ROWS / hand])
    ratio = best["kafka"] / best["kafka-eos"]
    text = table(["writer", "seconds per round", "records/s (best)"], rows)
    print(text)
    print(f"kafka-eos / Spark's kafka sink: {ratio:.2f}x")
    write(
        "kafka_sink",
        "kafka-eos beside Spark's Kafka sink",
        [("Throughput", text + f"\n\nkafka-eos / Spark's kafka sink: {ratio:.2f}x")],
    )
