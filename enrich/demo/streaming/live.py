"""Part 3 of ``enrich demo``: a streaming enrichment job on local Spark, watched live.

A ``rate`` source makes orders (``source="kafka"``: a producer writes them to a topic
of a Kafka broker the demo starts, :mod:`enrich.demo.kafka_broker`, and Spark's
``kafka`` source reads it); two chained lookup joins (Redis users, HTTP credit) enrich
them into the demo's sink, which counts them by case (:mod:`enrich.demo.streaming.sink_tally`).
Every step that blocks says what it waits for (:mod:`enrich.demo.streaming.waits`); while the query
runs, the live view (:mod:`enrich.demo.streaming.live_view`) says which step it waits for until
its first micro-batch with rows ends, then shows its numbers for ``duration`` seconds.
At the end (or on Ctrl-C) the query stops, and the demo prints its totals (rows in,
enriched, misses, dead letters) and a labelled sample of enriched rows: a hit, a miss, a
null key, and a row under the error policy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from connectors.redis import RedisLookup

from ..local import BROKEN_USER, DEMO_USERS
from ..postgres_store import users_store
from .live_view import batches_of, watch_live
from .sink_tally import CASES, SinkTally
from .stream_watch import WAIT_LIMIT, StreamWatch
from .waits import waiting

STOP_LIMIT = 60.0  # seconds a stop waits for the micro-batch in progress to end

# Of every 100 orders: five null keys, five unknown users, one broken value, the rest hits
# on users 20..69 (so the cache answers most of them).
ORDERS_SQL = (
    "value AS order_id",
    f"CASE WHEN value % 20 = 19 THEN NULL WHEN value % 20 = 18 THEN {DEMO_USERS} + value % 7 "
    f"WHEN value % 100 = 17 THEN {BROKEN_USER} ELSE 20 + value % 50 END AS user_id",
    "CAST(value % 97 AS DOUBLE) + 0.5 AS amount",
)


class QuietRedisLookup(RedisLookup):
    """The demo's users store: its copies on Spark's workers keep the join's per-row
    warnings (one per broken value, many a second here) off the console, where they would
    bury the live table; the table and the sample show those rows instead."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        logging.getLogger("enrich.lookup").setLevel(logging.ERROR)
        self.__dict__.update(state)


@contextlib.contextmanager
def _stderr_to(log: Path) -> Iterator[None]:
    """Standard error goes to ``log`` while the JVM starts, so that the JVM and the
    Python workers it forks write theirs there for good: its start-up warnings, and the
    tracebacks a worker prints when a stop cancels its task mid-batch, would garble the
    live table. If the start fails, the log's end is shown."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "ab") as file:
        os.dup2(file.fileno(), 2)
    started = False
    try:
        yield
        started = True
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        if not started:
            tail = log.read_text(errors="replace")[-4000:]
            print(f"Spark did not start; the end of {log}:\n{tail}", file=sys.stderr)


def java_missing() -> bool:
    import shutil

    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")


def live_demo(
    redis_url: str,
    http_base: str,
    duration: float,
    rows_per_second: int,
    source: str = "rate",
    postgres_url: str | None = None,
    wait_limit: float = WAIT_LIMIT,
) -> bool:
    """Run the streaming job until it has shown enriched rows for ``duration`` seconds,
    counted from its first micro-batch with rows (Ctrl-C stops it early); whether it did.

    It gives up when no micro-batch with rows ended within ``wait_limit`` seconds of the
    query's start, and says which step it was still waiting for; it ends with the totals
    either way. Spark's own output goes to a log in a temporary folder, removed at the
    end; when the demo fails or gives up, the folder is kept and named.
    ``source="kafka"``: the orders come from a Kafka broker started in that folder, fed
    by a producer at ``rows_per_second``.
    """
    folder = Path(tempfile.mkdtemp(prefix="enrich-demo-"))
    try:
        with contextlib.ExitStack() as stack:
            kafka = None
            if source == "kafka":
                kafka = stack.enter_context(_kafka_orders(folder, rows_per_second))
            failure = _live_demo(folder / "spark.log", redis_url, http_base, duration,
                                 rows_per_second, kafka, postgres_url, wait_limit)  # fmt: skip
    except KeyboardInterrupt:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except BaseException:
        print(f"Spark's log is kept in {folder}", file=sys.stderr)
        raise
    if failure is not None:
        print(f"Spark's log is kept in {folder}", file=sys.stderr)
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


@contextlib.contextmanager
def _kafka_orders(folder: Path, rows_per_second: int) -> Iterator[str]:
    """A broker of the demo's own, and a producer thread writing order numbers (0, 1,
    2...) to its topic ``orders`` at ``rows_per_second`` until the demo ends."""
    import threading

    from confluent_kafka import Producer

    from ..kafka_broker import KafkaBroker

    print("   starting a Kafka broker (one KRaft node, on loopback) ...", flush=True)
    broker = KafkaBroker(folder / "kafka").start()
    print(f"   kafka: {broker.bootstrap} (pid {broker.process.pid if broker.process else '-'})")
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        started, sent = time.perf_counter(), 0
        while not stop.is_set():
            due = int((time.perf_counter() - started) * rows_per_second)
            for order in range(sent, due):
                producer.produce("orders", str(order).encode())
            sent = max(sent, due)
            producer.poll(0)
            stop.wait(0.05)  # a tick: what is due goes out together
        producer.flush(10)

    thread = threading.Thread(target=produce, name="demo-producer", daemon=True)
    thread.start()
    try:
        yield broker.bootstrap
    finally:
        stop.set()
        thread.join(15)
        broker.stop()


def _live_demo(
    log: Path,
    redis_url: str,
    http_base: str,
    duration: float,
    rows_per_second: int,
    kafka: str | None = None,
    postgres_url: str | None = None,
    wait_limit: float = WAIT_LIMIT,
) -> str | None:
    """The streaming part; None when it showed rows for ``duration``, else why not."""
    from enrich.spark import session

    store = "PostgreSQL" if postgres_url else "Redis"
    where = f"the Kafka topic 'orders' ({kafka})" if kafka else "a rate source"
    print(
        f"3. Spark Structured Streaming: {rows_per_second:,} orders/s from {where},\n"
        f"   enriched from {store} (users), then HTTP (credit); enriched rows are shown for\n"
        f"   {duration:g} s from the first micro-batch with rows (Ctrl-C stops sooner)\n"
    )
    print(f"   Spark: its own output goes to {log} (its folder is removed at the end)")
    with waiting("Spark to start (local[2])", "Spark started"), _stderr_to(log):
        spark = session(
            "enrich-demo",
            master="local[2]",
            spark__ui__enabled="false",
            spark__ui__showConsoleProgress="false",  # its bar would land on our table
            spark__sql__shuffle__partitions="2",
            **_connector(kafka),
        )
    spark.sparkContext.setLogLevel("ERROR")
    query = None
    tally = SinkTally()
    try:
        with waiting("the query to start (Spark plans it and starts its source)", "query started"):
            enriched = _enriched(spark, redis_url, http_base, rows_per_second, kafka, postgres_url)
            query = (
                enriched.writeStream.foreachBatch(tally).trigger(processingTime="1 second").start()
            )
        watch = StreamWatch(duration=duration, wait_limit=wait_limit)
        failure = None
        try:
            watch_live(spark, query, watch)
            if watch.has_given_up():
                failure = watch.reason()
                _stop(query, tally, limit=0.0)
            elif not watch.is_done():  # the query ended by itself: it failed
                failure = f"the query stopped: {_first_line(query.exception())}"
            else:
                _stop(query, tally, limit=STOP_LIMIT)
        except KeyboardInterrupt:
            print(
                "\n   Ctrl-C: stopping the query after the micro-batch in progress "
                "(Ctrl-C again: at once) ...",
                flush=True,
            )
            # A stop in the middle of a batch makes its Python workers print tracebacks
            # of the closed sockets; one more second or two is cheaper than that noise.
            with contextlib.suppress(KeyboardInterrupt):
                _stop(query, tally, limit=30.0)
        watch.note(batches_of(query.recentProgress))  # what ended since the last look
        print()
        for line in tally.totals(watch.ended()).lines():
            print("   " + line)
        _samples(tally.samples(), typed=postgres_url is not None)
        if failure is not None:
            print(f"   The demo could not show its stream: {failure}.\n")
        return failure
    finally:
        if query is not None and query.isActive:
            tally.stopping()
            query.stop()
        # A task cancelled by a stop is logged at ERROR with a stack trace: not news here.
        spark.sparkContext.setLogLevel("OFF")
        with waiting("Spark to stop", "Spark stopped"):
            spark.stop()


def _enriched(
    spark: Any,
    redis_url: str,
    http_base: str,
    rows_per_second: int,
    kafka: str | None,
    postgres_url: str | None,
) -> Any:
    """The orders stream, enriched by the users join, then the credit join."""
    from connectors.http import HttpLookup
    from enrich import LookupCache
    from enrich.spark import lookup_join

    users = users_store(redis_url, postgres_url, QuietRedisLookup)
    credit = HttpLookup(http_base + "/users/{}", schema="credit double")
    if kafka:  # the producer's order numbers, as the rate source's value
        numbers = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka)
            .option("subscribe", "orders")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(CAST(value AS STRING) AS BIGINT) AS value")
        )
    else:
        numbers = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", rows_per_second)
            .option("numPartitions", 2)
            .load()
        )
    orders = numbers.selectExpr(*ORDERS_SQL)
    cache = LookupCache(max_rows=10_000, ttl=60)
    enriched = lookup_join(
        orders, users, on="user_id", cache=cache, on_error="error_column", name="users"
    )
    return lookup_join(enriched, credit, on="user_id", cache=cache, on_error="null", name="credit")


def _connector(kafka: str | None) -> dict[str, Any]:  # session()'s **conf (str values)
    if not kafka:
        return {}
    from ..kafka_broker import connector_jars

    return {"spark__jars": ",".join(str(jar) for jar in connector_jars())}


def _stop(query: Any, tally: SinkTally, limit: float) -> None:
    """Stop the query once the micro-batch in progress has ended (waiting at most
    ``limit`` seconds for it), so that the stop cuts short at most the planning of the
    next one, before any of its rows reach the sink."""
    batch = max((int(p["batchId"]) for p in query.recentProgress), default=-1) + 1
    what = "the query to stop"
    if limit > 0 and query.status.get("isTriggerActive", False):
        what = f"micro-batch {batch} to end (at most {limit:g} s), then the query to stop"
    with waiting(what, "query stopped"):
        ended = _batch_end(query, batch, limit)
        # A batch the stop cuts short in the sink makes py4j log the interruption, with
        # a Java stack trace, on the console; that batch counts nowhere (it reports no
        # progress), so the trace says nothing the totals do not.
        logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
        tally.stopping()  # and the sink's count of a batch cut short ends quietly
        query.stop()
    if not ended:
        print(f"   micro-batch {batch} did not end within {limit:g} s: the stop cut it short")


def _batch_end(query: Any, batch: int, limit: float) -> bool:
    """Wait (at most ``limit`` s) until micro-batch ``batch`` (or any later) has ended or
    no micro-batch runs; whether it came to that."""
    deadline = time.monotonic() + limit
    while query.isActive:
        if not query.status.get("isTriggerActive", False):
            return True
        if any(int(p["batchId"]) >= batch for p in query.recentProgress[-3:]):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _first_line(error: Any) -> str:
    return str(error).strip().splitlines()[0] if error else "no error given"


def _samples(samples: dict[str, dict[str, Any]], typed: bool = False) -> None:
    """One enriched row per case; ``typed`` (a PostgreSQL table): no bad value to show."""
    print("\n   A sample of enriched rows (users: left join, on_error='error_column';")
    print("   credit: left join, on_error='null'):\n")
    for case in CASES:
        if typed and case.name == "dead letter":
            continue  # user 13 is a plain row of the table: a hit
        shown = samples.get(case.label, "(none yet: run longer)")
        print(f"   {case.label:<24} {shown}")
    print()
