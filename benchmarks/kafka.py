"""End-to-end latency from Kafka to Kafka at a steady rate: ``kafka -> lookup_join ->
kafka`` beside Spark's own ``kafka -> kafka`` query with no Python stage, in one run,
against the project's broker (:mod:`enrich.demo.kafka_broker`) on local[2].

A producer process (confluent-kafka) writes order ids to a topic of 2 partitions at a
steady rate; each record's Kafka timestamp (CreateTime) is the producer's clock. Each
query reads the topic with Spark's ``kafka`` source and writes, with Spark's ``kafka``
sink, a record whose value carries the source record's timestamp; the output record's
own CreateTime is the clock of Spark's producer when it wrote it, on the same machine, so
latency = output timestamp - source timestamp. Both queries run under async progress
tracking (``asyncProgressTrackingEnabled``; Spark's Kafka sink supports it) with a
processing-time trigger of 0, one after the other in one Spark session, each on a topic
and a checkpoint of its own:

  (spark) ``kafka -> kafka``: the value re-encoded in SQL, no Python;
  (join) ``kafka -> lookup_join -> kafka``: the join against Redis (100,000 users, JSON
  values) on ``user_id = order_id * 7919 % 100000``, its defaults.

"After 10 s": records stamped 10 s or more after the producer's start. Every record must
come out once (Spark's Kafka sink is at-least-once: with no failure, none doubles).
Rerun: ``./scripts/dev bench kafka`` (``ENRICH_BENCH_KAFKA_RATE`` records/s, 10,000;
``ENRICH_BENCH_KAFKA_SECONDS`` of input per run, 30; ``ENRICH_BENCH_KAFKA_ROUNDS``, 1,
the paths in turn, every other round backwards).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._report import table, write
from .lookup import KEYS, load_users

RATE = int(os.environ.get("ENRICH_BENCH_KAFKA_RATE", 10_000))
SECONDS = float(os.environ.get("ENRICH_BENCH_KAFKA_SECONDS", 30))
ROUNDS = int(os.environ.get("ENRICH_BENCH_KAFKA_ROUNDS", 1))
FIRST = 10.0
DRAIN = 120.0  # seconds a query may take to catch up once the input ends
PATHS = ("spark", "join")
LABELS = {
    "spark": "Spark's own kafka -> kafka (no Python stage)",
    "join": "kafka -> lookup_join -> kafka",
}
# The producer: its own process (no GIL shared with py4j), a batch of records every 5 ms.
PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": 1})
total, sent = int(rate * seconds), 0
start = time.perf_counter()
print(repr(time.time()), flush=True)
while sent < total:
    due = min(total, int((time.perf_counter() - start) * rate) + 1)
    for order in range(sent, due):
        p.produce(topic, str(order).encode())
    sent = due
    p.poll(0)
    pause = start + sent / rate - time.perf_counter()
    time.sleep(max(0.005, pause) if pause > 0 else 0)
p.flush(60)
print(sent, flush=True)
"""


def query(spark: Any, bootstrap: str, redis_url: str, path: str, topic: str, chk: str) -> Any:
    """Start ``path``'s query reading ``topic`` and writing ``topic-out``."""
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(
            "CAST(CAST(value AS STRING) AS BIGINT) AS order_id",
            "unix_millis(timestamp) AS ts",
        )
    )
    if path == "join":
        from connectors.redis import RedisLookup
        from enrich.spark import lookup_join

        users = RedisLookup(
            redis_url, key_template="user:{}", value="json", schema="name string, tier string"
        )
        source = source.selectExpr("*", f"order_id * 7919 % {KEYS} AS user_id")
        source = lookup_join(source, users, on="user_id")
        value = "concat_ws(',', CAST(order_id AS STRING), CAST(ts AS STRING), name)"
    else:
        value = "concat_ws(',', CAST(order_id AS STRING), CAST(ts AS STRING))"
    return (
        source.selectExpr(f"{value} AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", f"{topic}-out")
        .option("checkpointLocation", chk)
        .option("asyncProgressTrackingEnabled", "true")
        .trigger(processingTime="0 seconds")
        .start()
    )


def measure(bootstrap: str, topic: str, produced: int, start: float) -> dict[str, Any]:
    """Read ``topic``'s output until ``produced`` distinct records came (or DRAIN)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"m-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([f"{topic}-out"])
    seen: set[int] = set()
    early: list[float] = []
    late: list[float] = []
    duplicates = 0
    deadline = time.monotonic() + DRAIN
    try:
        while len(seen) < produced and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is not None:
                    continue
                order, stamp = message.value().split(b",")[:2]
                if int(order) in seen:
                    duplicates += 1
                    continue
                seen.add(int(order))
                latency = message.timestamp()[1] - int(stamp)
                (early if int(stamp) / 1e3 < start + FIRST else late).append(latency)
    finally:
        consumer.close()
    return {"produced": produced, "lost": produced - len(seen), "duplicates": duplicates,
            "p50": _pct(late, 50), "p99": _pct(late, 99), "first_p99": _pct(early, 99)}  # fmt: skip


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return float("nan")
    return float(statistics.quantiles(values, n=100, method="inclusive")[q - 1])


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def run_path(spark: Any, bootstrap: str, redis_url: str, path: str, n: int, work: Path) -> Any:
    topic = f"bench-{path}-{n}"
    create_topic(bootstrap, topic, partitions=2)
    create_topic(bootstrap, f"{topic}-out", partitions=2)
    running = query(spark, bootstrap, redis_url, path, topic, str(work / f"chk-{topic}"))
    while not running.recentProgress:  # planned and its first (empty) batch ran
        if running.awaitTermination(0.2):
            raise RuntimeError(f"the {path} query ended: {running.exception()}")
    load = os.getloadavg()[0]
    producer = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, bootstrap, topic, str(RATE), str(SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert producer.stdout is not None
    start = float(producer.stdout.readline())
    produced = int(producer.stdout.readline())
    producer.wait()
    result = measure(bootstrap, topic, produced, start)
    batches = [p["durationMs"]["triggerExecution"] for p in running.recentProgress
               if p["numInputRows"]]  # fmt: skip
    running.stop()
    result["batch_ms"] = statistics.median(batches) if batches else float("nan")
    result["load"] = load
    return result


def main() -> None:
    from enrich.demo.kafka_broker import KafkaBroker, connector_jars
    from enrich.demo.local import local_redis
    from enrich.spark import session

    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    rows = []
    with tempfile.TemporaryDirectory(prefix="enrich-bench-kafka-") as tmp, local_redis() as url:
        work = Path(tmp)
        broker = KafkaBroker(work / "broker").start()
        try:
            load_users(url)
            spark = session(
                "bench-kafka",
                "local[2]",
                spark__ui__enabled="false",
                spark__ui__showConsoleProgress="false",
                spark__sql__shuffle__partitions="2",
                spark__jars=",".join(str(j) for j in connector_jars()),
            )
            spark.sparkContext.setLogLevel("ERROR")
            turns = [PATHS if n % 2 == 0 else PATHS[::-1] for n in range(ROUNDS)]
            for n, turn in enumerate(turns):
                for path in turn:
                    print(f"kafka: {path} at {RATE:,}/s", flush=True)
                    r = run_path(spark, broker.bootstrap, url, path, n, work)
                    once = "yes" if r["lost"] == 0 and r["duplicates"] == 0 else (
                        f"no: {r['lost']} lost, {r['duplicates']} doubled")  # fmt: skip
                    rows.append([LABELS[path], r["produced"], once, r["p50"], r["p99"],
                                 r["first_p99"], r["batch_ms"], f"{r['load']:.1f}"])  # fmt: skip
            spark.stop()
        finally:
            broker.stop()
    write(
        "kafka",
        "Kafka -> Kafka end-to-end latency, with and without a lookup_join",
        [
            (
                f"{RATE:,} records/s, {SECONDS:.0f} s of input, local[2], async progress "
                f"tracking, trigger 0 ({when} UTC)",
                table(
                    [
                        "query",
                        "records",
                        "each once",
                        "p50 ms (after 10 s)",
                        "p99 ms (after 10 s)",
                        "p99 ms (first 10 s)",
                        "median micro-batch ms",
                        "load before",
                    ],
                    rows,
                ),
            )
        ],
    )


if __name__ == "__main__":
    main()
