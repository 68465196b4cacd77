"""The steady-rate runs of :mod:`benchmarks.kafka`: the producer process, the four
queries, and the measure of their output (a Kafka topic, or a Redis stream).

Each run: a fresh input topic of 2 partitions, the query started and its first (empty)
micro-batch done, then a producer process writing order ids at the rate for the seconds
asked; every record's Kafka timestamp (CreateTime) is the producer's clock.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .lookup import KEYS

FIRST = 10.0  # seconds of input counted as "the first 10 s"
DRAIN = 120.0  # seconds a query may take to catch up once the input ends
PATHS = ("spark", "arrow", "join", "redis", "kafka", "redis-tasks")
LABELS = {
    "spark": "Spark's own kafka -> kafka (no Python stage)",
    "arrow": "kafka -> mapInArrow (identity) -> kafka: a bare Python stage",
    "join": "kafka -> lookup_join -> kafka",
    "redis": "kafka -> lookup_join -> redis sink, low_latency()",
    "kafka": 'kafka -> lookup_join -> kafka, low_latency(sink="kafka")',
    "redis-tasks": 'kafka -> lookup_join -> redis sink, low_latency(publish_from="tasks")',
}
VALUE_COLUMNS = "order_id,ts,name"  # the kafka path's JSON value
# The producer: its own process (no GIL shared with py4j), what is due every 5 ms.
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


def source(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """Spark's kafka source on ``topic`` from its start: ``order_id``, ``ts`` (the
    record's CreateTime, ms) and the record's ``topic``, ``partition``, ``offset``."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
    )
    return reader.load().selectExpr(
        "CAST(CAST(value AS STRING) AS BIGINT) AS order_id",
        "unix_millis(timestamp) AS ts",
        "topic",
        "partition",
        "offset",
    )


def joined(df: Any, redis_url: str) -> Any:
    """``df`` joined with the 100,000 users in Redis (JSON) on ``order_id * 7919 %
    100000``: what every Python path (and the hand-written consumer) computes."""
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join

    users = RedisLookup(
        redis_url, key_template="user:{}", value="json", schema="name string, tier string"
    )
    return lookup_join(df.selectExpr("*", f"order_id * 7919 % {KEYS} AS user_id"), users,
                       on="user_id")  # fmt: skip


def passthrough(df: Any) -> Any:
    """``df`` through a ``mapInArrow`` that returns its batches as they came: what a
    Python stage costs with no work in it."""

    def identity(batches: Any) -> Any:
        yield from batches

    return df.mapInArrow(identity, df.schema)


def to_kafka(df: Any, bootstrap: str, topic: str, checkpoint: str, *, asynchronous: bool) -> Any:
    """``df`` as ``order_id,ts[,name]`` records into ``topic`` with Spark's Kafka sink."""
    fields = "CAST(order_id AS STRING), CAST(ts AS STRING)"
    if "name" in df.columns:
        fields += ", name"
    writer = (
        df.selectExpr(f"concat_ws(',', {fields}) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
    )
    if asynchronous:
        writer = writer.option("asyncProgressTrackingEnabled", "true")
        writer = writer.trigger(processingTime="0 seconds")
    return writer.start()


def query(spark: Any, bootstrap: str, redis_url: str, path: str, topic: str, chk: str) -> Any:
    """Start ``path``'s query reading ``topic``, writing ``topic-out`` (a Kafka topic, or
    for ``redis`` a Redis stream of that name); ``kafka`` writes with the ``kafka-alo``
    sink, the join run in its write, each value the JSON of ``VALUE_COLUMNS``."""
    df = source(spark, bootstrap, topic)
    if path == "spark":
        return to_kafka(df, bootstrap, f"{topic}-out", chk, asynchronous=True)
    if path == "arrow":
        return to_kafka(passthrough(df), bootstrap, f"{topic}-out", chk, asynchronous=True)
    if path == "join":
        return to_kafka(joined(df, redis_url), bootstrap, f"{topic}-out", chk, asynchronous=True)
    from enrich.spark import low_latency

    if path == "kafka":  # the join in the kafka-alo sink's write; the value its JSON
        writer = low_latency(joined(df.select("order_id", "ts"), redis_url), sink="kafka")
        return (writer.option("kafka.bootstrap.servers", bootstrap)
                .option("topic", f"{topic}-out").option("valueColumns", VALUE_COLUMNS)
                .option("checkpointLocation", chk).start())  # fmt: skip
    # async progress tracking, trigger 0; redis-tasks: each task publishes its own rows
    publish = "tasks" if path == "redis-tasks" else "driver"
    writer = low_latency(joined(df, redis_url), publish_from=publish)
    return (writer.option("url", redis_url).option("stream", f"{topic}-out")
            .option("checkpointLocation", chk).start())  # fmt: skip


def create_topic(bootstrap: str, topic: str, partitions: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


class Latencies:
    """Latencies (ms) of distinct output records, split at ``start + FIRST``, and the
    records seen twice."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.seen: set[int] = set()
        self.early: list[float] = []
        self.late: list[float] = []
        self.duplicates = 0

    def add(self, order: int, stamp_ms: int, out_ms: int) -> None:
        if order in self.seen:
            self.duplicates += 1
            return
        self.seen.add(order)
        (self.early if stamp_ms / 1e3 < self.start + FIRST else self.late).append(out_ms - stamp_ms)

    def result(self, produced: int) -> dict[str, Any]:
        return {"produced": produced, "lost": produced - len(self.seen & set(range(produced))),
                "duplicates": self.duplicates, "p50": pct(self.late, 50),
                "p99": pct(self.late, 99), "first_p99": pct(self.early, 99)}  # fmt: skip


def each_once(r: dict[str, Any]) -> str:
    """A run's "each once" cell: "yes", or what was lost and doubled."""
    if r["lost"] == 0 and r["duplicates"] == 0:
        return "yes"
    return f"no: {r['lost']} lost, {r['duplicates']} doubled"


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return float("nan")
    return float(statistics.quantiles(values, n=100, method="inclusive")[q - 1])


def measure_kafka(bootstrap: str, topic: str, produced: int, start: float) -> dict[str, Any]:
    """Read ``topic`` until ``produced`` distinct records came (or DRAIN): latency = the
    output record's CreateTime (Spark's producer) - the source record's (ours)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"m-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    seen = Latencies(start)
    deadline = time.monotonic() + DRAIN
    try:
        while len(seen.seen) < produced and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    order, stamp = fields(message.value())
                    seen.add(order, stamp, message.timestamp()[1])
    finally:
        consumer.close()
    return seen.result(produced)


def fields(value: bytes) -> tuple[int, int]:
    """An output record's order id and source stamp: ``order_id,ts[,name]``, or the
    kafka path's JSON object of them."""
    if value[:1] == b"{":
        found = json.loads(value)
        return int(found["order_id"]), int(found["ts"])
    order, stamp = value.split(b",")[:2]
    return int(order), int(stamp)


def measure_redis(url: str, stream: str, produced: int, start: float) -> dict[str, Any]:
    """Wait until ``stream`` holds ``produced`` entries (or DRAIN), then read it: latency
    = the entry id's milliseconds (Redis' clock when the sink's commit wrote it, the same
    machine) - the source record's CreateTime, as benchmarks/latency.py measures it."""
    import redis

    client = redis.Redis.from_url(url)
    client.set_response_callback("XRANGE", lambda r, **_: r)
    deadline = time.monotonic() + DRAIN
    while client.xlen(stream) < produced and time.monotonic() < deadline:
        time.sleep(0.1)
    seen = Latencies(start)
    after = "-"
    while True:
        page = client.xrange(stream, after, "+", count=10_000)
        for entry_id, flat in page:
            fields = dict(zip(flat[0::2], flat[1::2], strict=True))
            seen.add(int(fields[b"order_id"]), int(fields[b"ts"]), int(entry_id.split(b"-")[0]))
        if len(page) < 10_000:
            break
        after = "(" + page[-1][0].decode()
    client.delete(stream)
    client.close()
    return seen.result(produced)


def run_path(
    spark: Any, bootstrap: str, url: str, path: str, rate: int, seconds: float, tag: str,
    work: Path, *, start: Callable[..., Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One run of ``path`` at ``rate`` records/s for ``seconds``: the query started and
    past its first batch, then the producer; the output measured; the query stopped.
    ``start`` (the arguments of :func:`query`) starts another path's query, one writing
    the Redis stream ``<topic>-out``."""
    topic = f"bench-{path}-{tag}"
    create_topic(bootstrap, topic)
    into_redis = path.startswith("redis") or start is not None
    if not into_redis:
        create_topic(bootstrap, f"{topic}-out")
    running = (start or query)(spark, bootstrap, url, path, topic, str(work / f"chk-{topic}"))
    while not running.recentProgress:  # planned and its first (empty) batch ran
        if running.awaitTermination(0.2):
            raise RuntimeError(f"the {path} query ended: {running.exception()}")
    load = os.getloadavg()[0]
    producer = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, bootstrap, topic, str(rate), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert producer.stdout is not None
    start = float(producer.stdout.readline())
    produced = int(producer.stdout.readline())
    producer.wait()
    if into_redis:
        result = measure_redis(url, f"{topic}-out", produced, start)
    else:
        result = measure_kafka(bootstrap, f"{topic}-out", produced, start)
    progress = [p for p in running.recentProgress if p["numInputRows"]]
    running.stop()
    durations = [p["durationMs"]["triggerExecution"] for p in progress]
    result["batch_ms"] = statistics.median(durations) if durations else float("nan")
    result["batch_rows"] = statistics.median(p["numInputRows"] for p in progress) if progress else 0
    phases = {key for p in progress for key in p["durationMs"]}
    result["phases_ms"] = {key: statistics.median(p["durationMs"].get(key, 0) for p in progress)
                           for key in sorted(phases)}  # fmt: skip
    result["slowest_ms"] = max((p["durationMs"] for p in progress),
                               key=lambda d: d.get("triggerExecution", 0), default={})  # fmt: skip
    result["load"] = load
    return result
