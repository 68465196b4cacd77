"""Part 3 of ``enrich demo``: a streaming enrichment job on local Spark, watched live.

A ``rate`` source makes orders (``source="kafka"``: a producer writes them to a topic
of a Kafka broker the demo starts, :mod:`enrich.demo.kafka_broker`, and Spark's
``kafka`` source reads it); two chained lookup joins (Redis users, HTTP credit) enrich
them into a memory table. While it runs, a table (``rich``, when installed and
the output is a terminal; one plain line every two seconds otherwise) shows micro-batches,
rows/s, lookup latency p50/p99, the cache hit ratio, retries and errors by reason. At the
end (``duration`` seconds, or Ctrl-C) the query stops and a labelled sample of enriched
rows is shown: a hit, a miss, a null key, and a row under the error policy.
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

from .local import BROKEN_USER, DEMO_USERS
from .postgres_store import users_lookup

REFRESH = 0.5  # seconds between live updates
PLAIN_EVERY = 2.0  # seconds between plain progress lines
TABLE = "demo_enriched"

# Of every 100 orders: five null keys, five unknown users, one broken value, the rest hits
# on users 20..69 (so the cache answers most of them).
ORDERS_SQL = (
    "value AS order_id",
    f"CASE WHEN value % 20 = 19 THEN NULL WHEN value % 20 = 18 THEN {DEMO_USERS} + value % 7 "
    f"WHEN value % 100 = 17 THEN {BROKEN_USER} ELSE 20 + value % 50 END AS user_id",
    "CAST(value % 97 AS DOUBLE) + 0.5 AS amount",
)
SAMPLES = (
    ("hit", "name IS NOT NULL AND enrich_error IS NULL"),
    ("miss: no such user", f"user_id >= {DEMO_USERS}"),
    ("null key: no lookup", "user_id IS NULL"),
    ("error policy: bad value", "enrich_error IS NOT NULL"),
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
) -> None:
    """Run the streaming job for ``duration`` seconds (Ctrl-C stops it early).

    Spark's own output goes to a log in a temporary folder, removed at the end; when the
    demo fails, the folder is kept and named. ``source="kafka"``: the orders come from a
    Kafka broker started in that folder, fed by a producer at ``rows_per_second``.
    """
    folder = Path(tempfile.mkdtemp(prefix="enrich-demo-"))
    try:
        if source == "kafka":
            with _kafka_orders(folder, rows_per_second) as bootstrap:
                _live_demo(folder / "spark.log", redis_url, http_base, duration,
                           rows_per_second, bootstrap, postgres_url)  # fmt: skip
        else:
            _live_demo(folder / "spark.log", redis_url, http_base, duration, rows_per_second,
                       postgres_url=postgres_url)  # fmt: skip
    except KeyboardInterrupt:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except BaseException:
        print(f"Spark's log is kept in {folder}", file=sys.stderr)
        raise
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _kafka_orders(folder: Path, rows_per_second: int) -> Iterator[str]:
    """A broker of the demo's own, and a producer thread writing order numbers (0, 1,
    2...) to its topic ``orders`` at ``rows_per_second`` until the demo ends."""
    import threading

    from confluent_kafka import Producer

    from .kafka_broker import KafkaBroker

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
) -> None:
    from connectors.http import HttpLookup
    from enrich import LookupCache
    from enrich.spark import lookup_join, session

    store = "PostgreSQL" if postgres_url else "Redis"
    where = f"the Kafka topic 'orders' ({kafka})" if kafka else "a rate source"
    print(
        f"3. Spark Structured Streaming: {rows_per_second:,} orders/s from {where},\n"
        f"   enriched from {store} (users), then HTTP (credit), for {duration:g} s "
        "(Ctrl-C stops sooner)\n"
    )
    print(
        f"   starting Spark (local[2]; its own output goes to {log}, removed at the end) ...",
        flush=True,
    )
    with _stderr_to(log):
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
    try:
        users: Any = (
            users_lookup(postgres_url)
            if postgres_url
            else QuietRedisLookup(
                redis_url, key_template="user:{}", value="json", schema="name string, tier string"
            )
        )
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
        enriched = lookup_join(
            enriched, credit, on="user_id", cache=cache, on_error="null", name="credit"
        )
        query = (
            enriched.writeStream.format("memory")
            .queryName(TABLE)
            .trigger(processingTime="1 second")
            .start()
        )
        try:
            _watch(query, duration)
            _finish_batch(query)
        except KeyboardInterrupt:
            print(
                "\n   Ctrl-C: stopping the query after the micro-batch in progress "
                "(Ctrl-C again: at once) ...",
                flush=True,
            )
            # A stop in the middle of a batch makes its Python workers print tracebacks
            # of the closed sockets; one more second or two is cheaper than that noise.
            with contextlib.suppress(KeyboardInterrupt):
                _finish_batch(query, limit=30.0, rows=False)
        # A task cancelled by stop() is logged at ERROR with a stack trace: not news here.
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
        _samples(spark, typed=postgres_url is not None)
    finally:
        if query is not None and query.isActive:
            query.stop()
        spark.stop()


def _connector(kafka: str | None) -> dict[str, Any]:  # session()'s **conf (str values)
    if not kafka:
        return {}
    from .kafka_broker import connector_jars

    return {"spark__jars": ",".join(str(jar) for jar in connector_jars())}


def _status(query: Any, started: float) -> dict[str, str]:
    from enrich.spark import statistics

    progress = query.recentProgress
    last = progress[-1] if progress else {}
    rows = sum(int(p.get("numInputRows", 0)) for p in progress)
    users, credit = statistics("users"), statistics("credit")
    errors = dict(users.errors)
    for reason, count in credit.errors.items():
        errors[reason] = errors.get(reason, 0) + count

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1e3:.1f} ms"

    waiting = "" if progress else " (first micro-batch: Spark starts its Python workers)"
    return {
        "elapsed": f"{time.monotonic() - started:.0f} s{waiting}",
        "micro-batches": str(len(progress)),
        "rows": f"{rows:,}",
        "rows/s": f"{float(last.get('processedRowsPerSecond', 0.0)):,.0f}",
        "users p50 / p99": f"{ms(users.latency_p50)} / {ms(users.latency_p99)}",
        "credit p50 / p99": f"{ms(credit.latency_p50)} / {ms(credit.latency_p99)}",
        "cache hit ratio": f"{users.cache_hit_ratio:.2f} / {credit.cache_hit_ratio:.2f}",
        "misses": f"{users.misses:,} / {credit.misses:,}",
        "retries": str(users.retries + credit.retries),
        "errors": ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "none",
    }


def _watch(query: Any, duration: float) -> None:
    started = time.monotonic()
    deadline = started + duration
    try:
        from rich.live import Live
        from rich.table import Table

        fancy = sys.stdout.isatty()
    except ImportError:  # rich is optional: plain lines instead
        fancy = False
    if not fancy:
        next_line = started
        while time.monotonic() < deadline and query.isActive:
            if time.monotonic() >= next_line:
                status = _status(query, started)
                print("   " + "  ".join(f"{k} {v}" for k, v in status.items()), flush=True)
                next_line += PLAIN_EVERY
            time.sleep(REFRESH)
        return

    def table() -> Any:
        shown = Table(title="live: users / credit (HTTP)", show_header=False)
        shown.add_column("what", style="bold")
        shown.add_column("value", justify="right")
        for key, value in _status(query, started).items():
            shown.add_row(key, value)
        return shown

    with Live(table(), refresh_per_second=4, transient=False) as live:
        while time.monotonic() < deadline and query.isActive:
            time.sleep(REFRESH)
            live.update(table())


def _finish_batch(query: Any, limit: float = 60.0, rows: bool = True) -> None:
    """Wait (up to ``limit`` s) until no micro-batch is running and, with ``rows``, one has
    committed rows, so that the sample has rows and the stop interrupts no batch."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and query.isActive:
        committed = not rows or any(int(p.get("numInputRows", 0)) for p in query.recentProgress)
        if committed and not query.status.get("isTriggerActive", False):
            return
        time.sleep(0.1)


def _samples(spark: Any, typed: bool = False) -> None:
    """One enriched row per case; ``typed`` (a PostgreSQL table): no bad value to show."""
    print("\n   A sample of enriched rows (users: left join, on_error='error_column';")
    print("   credit: left join, on_error='null'):\n")
    columns = "order_id, user_id, amount, name, tier, credit, enrich_error"
    for label, where in SAMPLES:
        if typed and label.startswith("error policy"):
            continue  # user 13 is a plain row of the table: a hit
        rows = spark.sql(f"SELECT {columns} FROM {TABLE} WHERE {where} LIMIT 1").collect()
        shown = rows[0].asDict() if rows else "(none yet: run longer)"
        print(f"   {label:<24} {shown}")
    print()
