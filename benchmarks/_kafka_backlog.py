"""The backlog part of :mod:`benchmarks.kafka`: ``records`` order ids in a topic of 2
partitions before anything reads them, then, on the same topic, in turn:

  (spark) Spark's own ``kafka -> kafka``, no Python stage, the same defaults: the floor
  of the JVM side (query start, source, sink) for the row below;
  (join) ``kafka -> lookup_join -> kafka`` on the library's defaults (Spark's default
  trigger, no ``maxOffsetsPerTrigger``, synchronous progress tracking), timed from
  building the query, in a session already running, to the last output record;
  (hand) what a user writes without Spark: 2 processes (one a core), each a consumer in
  one group (``consume`` of up to ``BATCH`` records, one Redis ``MGET`` of their users,
  orjson, ``produce`` each), timed from starting the processes to the last output
  record. At-least-once, offsets auto-committed (confluent-kafka's defaults).

Both write ``order_id,ts,name`` records to a fresh topic of 2 partitions; the end is
the output topic's high watermarks adding up to ``records``; every order id is then
checked to be there once. ``python -m benchmarks._kafka_backlog --hand BOOTSTRAP TOPIC
OUT REDIS_URL`` runs one hand-written consumer (until killed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ._kafka_runs import create_topic, joined, source, to_kafka
from .lookup import KEYS

BATCH = 1_000  # records a hand-written consume() returns at most
TIMEOUT = 900.0  # seconds a path may take over the backlog
ROOT = Path(__file__).resolve().parents[1]


def fill(bootstrap: str, topic: str, records: int) -> None:
    """``records`` order ids (0..records-1) into ``topic`` (not timed)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1})
    for order in range(records):
        while True:
            try:
                producer.produce(topic, str(order).encode())
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.05)
        if order % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered to {topic}")


def written(bootstrap: str, topic: str) -> int:
    """Records in ``topic``: the sum of its partitions' high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in meta)  # fmt: skip
    finally:
        consumer.close()


def await_written(bootstrap: str, topic: str, records: int, began: float) -> float:
    """Seconds since ``began`` when ``topic`` holds ``records`` records."""
    deadline = time.monotonic() + TIMEOUT
    while written(bootstrap, topic) < records:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} got {written(bootstrap, topic)} of {records} records")
        time.sleep(0.05)
    return time.perf_counter() - began


def check(bootstrap: str, topic: str, records: int) -> tuple[int, int]:
    """(lost, doubled) order ids of ``topic`` against 0..records-1."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"c-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    seen = bytearray(records)
    total = 0
    deadline = time.monotonic() + 120
    try:
        while total < records and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    seen[int(message.value().split(b",", 1)[0])] += 1
                    total += 1
    finally:
        consumer.close()
    return seen.count(0), sum(n - 1 for n in seen if n > 1)


def spark_path(
    spark: Any, bootstrap: str, url: str, topic: str, work: Path, *, join: bool = True
) -> dict[str, Any]:
    """The query (with the join, or Spark's own without), timed from its construction."""
    out = f"{topic}-{'join' if join else 'spark'}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, out)
    records = written(bootstrap, topic)
    began = time.perf_counter()
    df = source(spark, bootstrap, topic)
    df = joined(df, url) if join else df
    query = to_kafka(df, bootstrap, out, str(work / f"chk-{out}"), asynchronous=False)
    seconds = await_written(bootstrap, out, records, began)
    query.processAllAvailable()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    lost, doubled = check(bootstrap, out, records)
    return {"seconds": seconds, "lost": lost, "duplicates": doubled, "batches": len(progress)}


def hand_path(bootstrap: str, url: str, topic: str) -> dict[str, Any]:
    out = f"{topic}-hand-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, out)
    records = written(bootstrap, topic)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys([str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    )
    group = f"hand-{uuid.uuid4().hex[:6]}"
    began = time.perf_counter()
    command = [sys.executable, "-m", "benchmarks._kafka_backlog", "--hand", bootstrap, topic,
               out, url, group]  # fmt: skip
    workers = [subprocess.Popen(command, cwd=ROOT, env=env) for _ in range(2)]
    try:
        seconds = await_written(bootstrap, out, records, began)
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait()
    lost, doubled = check(bootstrap, out, records)
    return {"seconds": seconds, "lost": lost, "duplicates": doubled, "batches": None, "topic": out}


def hand_main(bootstrap: str, topic: str, out: str, url: str, group: str) -> None:
    """One hand-written consumer: consume, MGET, produce, until killed."""
    import orjson
    import redis
    from confluent_kafka import Consumer, Producer

    client = redis.Redis.from_url(url)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    producer = Producer({"bootstrap.servers": bootstrap})
    consumer.subscribe([topic])
    while True:
        messages = [m for m in consumer.consume(BATCH, 0.1) if m.error() is None]
        if not messages:
            producer.poll(0)
            continue
        orders = [int(m.value()) for m in messages]
        users = client.mget([f"user:{order * 7919 % KEYS}" for order in orders])
        for message, order, raw in zip(messages, orders, users, strict=True):
            name = orjson.loads(raw)["name"] if raw is not None else ""
            value = f"{order},{message.timestamp()[1]},{name}"
            while True:
                try:
                    producer.produce(out, value.encode())
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--hand":
        hand_main(*sys.argv[2:])
