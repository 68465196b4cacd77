"""Spark enrichment jobs side by side: ``lookup_join`` and the SQL function against the
Python code people write by hand, on ``local[2]`` with Redis on loopback.

Every path reads the same cached DataFrame of ``ROWS`` orders (``user_id`` uniformly
random over 100,000 keys, 2 partitions) and writes to Spark's ``noop`` sink, so a run
times the whole job: scheduling, Arrow/pickle transfer to the Python workers, the
lookups and the way back. Paths:

  lookup_join (ordered and unordered on its defaults, and tuned capacities) and the SQL
  function from ``register_lookup``; (a) a row-at-a-time Python UDF with one sync GET
  per row; Spark's own concurrent row UDF (an Arrow-optimized UDF doing the same GET,
  run by ``CONCURRENCY_LEVELS`` threads per worker with
  ``spark.sql.execution.pythonUDF.arrow.concurrency.level``); (b) mapInPandas with one
  sync MGET per Arrow batch; (d) mapInArrow with one sync MGET per batch and Arrow's
  JSON reader; (c) mapInPandas passing the batches through with no lookup (the
  ceiling); and mapInArrow passing through (the ceiling of ``lookup_join``'s own
  plumbing).

HTTP: a service adding 5 ms per request; lookup_join with capacity 100 on one partition,
per-key GETs and the batch endpoint, against the Little's law bound 100 / 5 ms, and
Spark's concurrent row UDF doing one GET per row (requests, a pooled session).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import aiohttp
import redis

from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from enrich.demo.local import dimension_service, local_redis

from ._report import best_rate, table, write
from .lookup import KEYS, load_users, loads

ROWS = int(os.environ.get("ENRICH_BENCH_SPARK_ROWS", 1_000_000))
UDF_ROWS = min(ROWS, 50_000)  # the row-at-a-time UDF is slow: its rate is what matters
HTTP_ROWS = int(os.environ.get("ENRICH_BENCH_SPARK_HTTP_ROWS", 20_000))
HTTP_UDF_ROWS = min(HTTP_ROWS, 5_000)  # the concurrent row UDF over HTTP: its rate matters
# Spark's own concurrency for row UDFs (pyspark >= 4.1: Arrow-optimized UDFs only): a
# thread pool of this many threads per Python worker evaluates a batch's rows.
CONCURRENCY = "spark.sql.execution.pythonUDF.arrow.concurrency.level"
CONCURRENCY_LEVELS = (16, 64)
PARTITIONS = 2
CAPACITY = 131072  # lookup_join's default (enrich.spark.join.join_batches.DEFAULT_SPARK_CAPACITY)
TUNED_CAPACITIES = (32768, 65536, 262144)
HTTP_LATENCY = 0.005
HTTP_CAPACITY = 100
REPEAT = 3  # best of (rounds): the machine is shared and noisy, and the JVM warms up
SCHEMA = "name string, tier string, credit double"
STRUCT = "struct<name: string, tier: string, credit: double>"
ROOT = Path(__file__).resolve().parents[1]

Row = tuple[str, str, float]


# -- the executor side of the hand-written paths ----------------------------------------
# Module-level, so Spark's workers import them (the repository root is on PYTHONPATH).

_clients: dict[tuple[int, str], redis.Redis] = {}


def sync_client(url: str) -> redis.Redis:
    """One sync client (hiredis parser when installed) per worker process and URL."""
    key = (os.getpid(), url)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = redis.Redis.from_url(url)
    return client


def decode(raw: bytes | str | None) -> Row | None:
    if raw is None:
        return None
    document = loads(raw)
    return (str(document["name"]), str(document["tier"]), float(document["credit"]))


def get_per_row(url: str) -> Callable[[int], Row | None]:
    """(a) The UDF body: one GET per row."""

    def lookup(user_id: int) -> Row | None:
        return decode(sync_client(url).get(f"user:{user_id}"))

    return lookup


_sessions: dict[int, Any] = {}


def http_get_per_row(base: str) -> Callable[[int], Row | None]:
    """The UDF body over HTTP: one GET per row on a pooled ``requests`` session (one per
    worker process, connections enough for the highest concurrency level)."""

    def lookup(user_id: int) -> Row | None:
        import requests

        session = _sessions.get(os.getpid())
        if session is None:
            session = _sessions[os.getpid()] = requests.Session()
            adapter = requests.adapters.HTTPAdapter(pool_maxsize=max(CONCURRENCY_LEVELS))
            session.mount("http://", adapter)
        response = session.get(f"{base}/users/{user_id}", timeout=10)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return decode(response.content)

    return lookup


def with_concurrency(spark: Any, level: int | None, run: Callable[[], int]) -> int:
    """``run()`` with Spark's row-UDF concurrency set to ``level`` (None: unset)."""
    if level is None:
        return run()
    spark.conf.set(CONCURRENCY, str(level))
    try:
        return run()
    finally:
        spark.conf.unset(CONCURRENCY)


def mget_per_batch(url: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """(b) The mapInPandas body: one MGET per batch, each value decoded into three
    typed columns."""

    def enrich_frames(frames: Iterator[Any]) -> Iterator[Any]:
        client = sync_client(url)
        for frame in frames:
            keys = [f"user:{k}" for k in frame["user_id"].tolist()]
            names: list[str | None] = []
            tiers: list[str | None] = []
            credits: list[float | None] = []
            for raw in client.mget(keys) if keys else []:
                row = decode(raw)
                if row is None:
                    names.append(None)
                    tiers.append(None)
                    credits.append(None)
                else:
                    names.append(row[0])
                    tiers.append(row[1])
                    credits.append(row[2])
            yield frame.assign(name=names, tier=tiers, credit=credits)

    return enrich_frames


def mget_arrow_per_batch(url: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """(d) The mapInArrow body a user who knows Arrow writes: the Redis keys built by
    Arrow compute, one MGET per batch, the values that came back read at once by Arrow's
    JSON reader, and aligned with the rows by ``take`` (a miss: null). Synchronous: no
    request overlaps the decoding."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    fields = [("name", pa.string()), ("tier", pa.string()), ("credit", pa.float64())]
    parse = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
    prefix = pa.scalar(b"user:", pa.binary())

    def enrich_batches(batches: Iterator[Any]) -> Iterator[Any]:
        client = sync_client(url)
        for batch in batches:
            text = pc.cast(pc.cast(batch.column("user_id"), pa.string()), pa.binary())
            values = client.mget(pc.binary_join_element_wise(prefix, text, b"").to_pylist())
            present = [value for value in values if value is not None]
            if present:
                blob = b"\n".join(present)
                read = pj.ReadOptions(use_threads=False, block_size=len(blob) + 1)
                table = pj.read_json(pa.BufferReader(blob), read_options=read, parse_options=parse)
                columns = [table.column(n).combine_chunks() for n, _ in fields]
            else:  # Arrow's reader refuses an empty input
                columns = [pa.nulls(0, kind) for _, kind in fields]
            if len(present) < len(values):  # misses: each row takes its value's index
                found = pa.array([value is not None for value in values])
                index = pc.subtract(pc.cumulative_sum(pc.cast(found, pa.int64())), 1)
                index = pc.if_else(found, index, pa.scalar(None, pa.int64()))
                columns = [column.take(index) for column in columns]
            names = [*batch.schema.names, *(name for name, _ in fields)]
            yield pa.RecordBatch.from_arrays([*batch.columns, *columns], names=names)

    return enrich_batches


def passthrough(batches: Iterator[Any]) -> Iterator[Any]:
    """(c) The ceiling: batches in, the same batches out (pandas or Arrow)."""
    yield from batches


# -- the driver --------------------------------------------------------------------------


def start_spark(**conf: str) -> Any:
    """local[2], the workers on this interpreter and able to import this package; ``conf``
    adds settings (``spark__jars=...``). ``ENRICH_BENCH_CLASS_ARCHIVE=0``: the driver's JVM
    without the class-data archive (``session(class_archive=False)``), for a comparison."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from enrich.spark import session

    spark = session(
        "enrich-bench",
        master=f"local[{PARTITIONS}]",
        spark__ui__enabled="false",
        spark__ui__showConsoleProgress="false",
        spark__sql__shuffle__partitions=str(PARTITIONS),
        spark__default__parallelism=str(PARTITIONS),
        spark__python__worker__reuse="true",
        spark__driver__memory="2g",
        class_archive=os.environ.get("ENRICH_BENCH_CLASS_ARCHIVE", "1") == "1",
        **conf,
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def orders(spark: Any, rows: int, partitions: int, seed: int) -> Any:
    """``rows`` orders with a uniformly random ``user_id``, cached (not part of a timing)."""
    from pyspark.sql import functions as F

    df = spark.range(rows, numPartitions=partitions).select(
        F.col("id").alias("order_id"),
        (F.rand(seed) * KEYS).cast("bigint").alias("user_id"),
        F.round(F.rand(seed + 1) * 100, 2).alias("amount"),
    )
    df = df.cache()
    df.count()
    return df


def sink(df: Any, rows: int) -> int:
    df.write.format("noop").mode("overwrite").save()
    return rows


def rate_of(df: Any, rows: int) -> float:
    return best_rate(lambda: sink(df, rows), repeat=REPEAT)


def redis_paths(spark: Any, url: str) -> tuple[str, dict[str, float]]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from enrich.spark import lookup_join, statistics
    from enrich.spark.sql.lookup_udf import register_lookup

    source = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
    df = orders(spark, ROWS, PARTITIONS, seed=7)
    small = orders(spark, UDF_ROWS, PARTITIONS, seed=8)
    # Warm-up: every worker imports the engine and opens its Redis pool before any timing.
    sink(lookup_join(small, source, on="user_id", timeout=None, name="warm_up"), UDF_ROWS)
    register_lookup(spark, "dim_user", source, timeout=None)
    df.createOrReplaceTempView("orders")
    dimension = cast(StructType, StructType.fromDDL(SCHEMA))
    enriched = StructType([*df.schema.fields, *dimension.fields])
    # The classic (pickled, not Arrow-optimized) row-at-a-time UDF, Spark's default.
    get_udf = F.udf(get_per_row(url), STRUCT, useArrow=False)
    # Spark's own concurrent row UDF: Arrow-optimized, the same GET per row.
    concurrent_udf = F.udf(get_per_row(url), STRUCT, useArrow=True)
    levels: dict[str, int] = {}
    paths: list[tuple[str, Any, int, str | None]] = [
        (
            f"lookup_join, {mode}, defaults",
            lookup_join(df, source, on="user_id", timeout=None, mode=mode, name=f"bench_{mode}"),
            ROWS,
            f"bench_{mode}",
        )
        for mode in ("ordered", "unordered")
    ]
    paths += [
        (
            f"tuned lookup_join, capacity {capacity}",
            lookup_join(
                df, source, on="user_id", capacity=capacity, timeout=None, name=f"bench_{capacity}"
            ),
            ROWS,
            f"bench_{capacity}",
        )
        for capacity in TUNED_CAPACITIES
    ]
    paths += [
        (
            "SQL dim_user(user_id), defaults",
            spark.sql("SELECT *, dim_user(user_id) AS u FROM orders"),
            ROWS,
            "dim_user",
        ),
        (
            f"(a) Python UDF, sync GET per row ({UDF_ROWS:,} rows)",
            small.select("*", get_udf("user_id").alias("u")),
            UDF_ROWS,
            None,
        ),
        *(
            (
                f"(s{level}) Spark's concurrent row UDF, GET per row, "
                f"concurrency.level {level} ({UDF_ROWS:,} rows)",
                small.select("*", concurrent_udf("user_id").alias("u")),
                UDF_ROWS,
                None,
            )
            for level in CONCURRENCY_LEVELS
        ),
        (
            "(b) mapInPandas, sync MGET per batch",
            df.mapInPandas(mget_per_batch(url), enriched),
            ROWS,
            None,
        ),
        (
            "(d) mapInArrow, sync MGET per batch, Arrow's JSON reader",
            df.mapInArrow(mget_arrow_per_batch(url), enriched),
            ROWS,
            None,
        ),
        (
            "(c) mapInPandas passthrough, no lookup",
            df.mapInPandas(passthrough, df.schema),
            ROWS,
            None,
        ),
        ("mapInArrow passthrough, no lookup", df.mapInArrow(passthrough, df.schema), ROWS, None),
    ]
    # Rounds rather than back-to-back repeats: a burst of load from the machine's other
    # tenants then spoils one run of a path, not both.
    for level in CONCURRENCY_LEVELS:
        levels.update({label: level for label, *_ in paths if label.startswith(f"(s{level})")})
    rates = dict.fromkeys((label for label, *_ in paths), 0.0)
    for round_ in range(REPEAT):
        for label, frame, rows, _ in paths:
            run = partial(with_concurrency, spark, levels.get(label), partial(sink, frame, rows))
            rate = best_rate(run, repeat=1)
            rates[label] = max(rates[label], rate)
            print(f"  round {round_ + 1}, {label}: {rate:,.0f} rows/s")
    batching = {
        label: f"{statistics(name).keys_per_request:.0f}"
        for label, _, _, name in paths
        if name is not None
    }
    df.unpersist()
    small.unpersist()

    def best_of(prefix: str) -> float:
        return max(v for k, v in rates.items() if k.startswith(prefix))

    a, b, c, d = best_of("(a)"), best_of("(b)"), best_of("(c)"), best_of("(d)")
    table_rows = [
        [label, r, r / a, r / b, r / c, r / d, batching.get(label, "-")]
        for label, r in rates.items()
    ]
    headers = ["path", "rows/s", "vs (a)", "vs (b)", "vs (c)", "vs (d)", "keys per lookup_many"]
    summary = {
        "main": best_of("lookup_join, ordered"),
        "tuned": max(best_of("tuned"), best_of("lookup_join")),
        "sql": best_of("SQL"),
        "a": a,
        "s": max(best_of(f"(s{level})") for level in CONCURRENCY_LEVELS),
        "b": b,
        "c": c,
        "d": d,
    }
    return table(headers, table_rows), summary


def ratio_section(r: dict[str, float]) -> str:
    checks = [
        ("lookup_join (defaults) vs (a) GET per row", r["main"] / r["a"], ">= 30x", 30.0),
        (
            "lookup_join (defaults) vs Spark's concurrent row UDF (best level)",
            r["main"] / r["s"],
            "-",
            0.0,
        ),
        ("lookup_join (defaults) vs (b) MGET per batch", r["main"] / r["b"], ">= 2.0x", 2.0),
        ("lookup_join (defaults) vs (c) passthrough", r["main"] / r["c"], ">= 0.4", 0.4),
        ("lookup_join defaults vs its best tuned setting", r["main"] / r["tuned"], ">= 0.9", 0.9),
        ("SQL function (defaults) vs lookup_join", r["sql"] / r["main"], "-", 0.0),
        ("lookup_join (defaults) vs (d) MGET + Arrow JSON", r["main"] / r["d"], "-", 0.0),
        ("(d) MGET + Arrow JSON vs (b) MGET per batch", r["d"] / r["b"], "-", 0.0),
    ]
    rows = [
        [what, ratio, target, "-" if not bound else ("met" if ratio >= bound else "MISSED")]
        for what, ratio, target, bound in checks
    ]
    return (
        table(["ratio (lookup_join on its defaults)", "measured", "target", ""], rows)
        + f"\n\nlookup_join on its defaults: {r['main']:,.0f} rows/s; best tuned: "
        + f"{r['tuned']:,.0f} rows/s; SQL function: {r['sql']:,.0f} rows/s."
    )


async def bare_gets(base: str, keys: list[int]) -> int:
    """Reference: aiohttp alone, HTTP_CAPACITY GETs in flight, no Spark and no engine."""
    connector = aiohttp.TCPConnector(limit=HTTP_CAPACITY)
    async with aiohttp.ClientSession(connector=connector) as session:
        slots = asyncio.Semaphore(HTTP_CAPACITY)

        async def get(key: int) -> None:
            async with slots, session.get(f"{base}/users/{key}") as response:
                await response.read()

        await asyncio.gather(*(get(k) for k in keys))
    return len(keys)


async def bare_batches(base: str, keys: list[int]) -> int:
    """Reference: aiohttp alone, one POST of HTTP_CAPACITY keys at a time."""
    async with aiohttp.ClientSession() as session:
        for start in range(0, len(keys), HTTP_CAPACITY):
            chunk = keys[start : start + HTTP_CAPACITY]
            async with session.post(f"{base}/users/_batch", json=chunk) as response:
                await response.read()
    return len(keys)


def run_async(run: Callable[[str, list[int]], Any], base: str, keys: list[int]) -> int:
    count: int = asyncio.run(run(base, keys))
    return count


def http_section(spark: Any, base: str) -> str:
    from pyspark.sql import functions as F

    from enrich.spark import lookup_join, statistics

    bound = HTTP_CAPACITY / HTTP_LATENCY
    df = orders(spark, HTTP_ROWS, 1, seed=11)
    per_key = HttpLookup(base + "/users/{}", schema=SCHEMA, max_connections=HTTP_CAPACITY)
    batched = HttpLookup(
        base + "/users/{}",
        schema=SCHEMA,
        batch_url=base + "/users/_batch",
        max_batch=HTTP_CAPACITY,
        max_connections=HTTP_CAPACITY,
    )
    rows: list[list[Any]] = []
    for n, (label, source, mode) in enumerate(
        (
            ("lookup_join, per-key GET, ordered", per_key, "ordered"),
            ("lookup_join, per-key GET, unordered", per_key, "unordered"),
            ("lookup_join, batch endpoint, ordered", batched, "ordered"),
        )
    ):
        name = f"http_{n}"
        joined = lookup_join(
            df, source, on="user_id", capacity=HTTP_CAPACITY, timeout=None, mode=mode, name=name
        )
        rate = rate_of(joined, HTTP_ROWS)
        per_call = f"{statistics(name).keys_per_request:.0f}"
        print(f"  HTTP {label}: {rate:,.0f} rows/s")
        rows.append([label, rate, rate / bound, per_call])
    df.unpersist()
    small = orders(spark, HTTP_UDF_ROWS, 1, seed=12)
    get_udf = F.udf(http_get_per_row(base), STRUCT, useArrow=True)
    frame = small.select("*", get_udf("user_id").alias("u"))
    for level in CONCURRENCY_LEVELS:
        label = (
            f"Spark's concurrent row UDF, GET per row, concurrency.level {level} "
            f"({HTTP_UDF_ROWS:,} rows)"
        )
        run = partial(with_concurrency, spark, level, partial(sink, frame, HTTP_UDF_ROWS))
        rate = best_rate(run, repeat=REPEAT)
        print(f"  HTTP {label}: {rate:,.0f} rows/s")
        rows.append([label, rate, rate / bound, "-"])
    small.unpersist()
    rng = random.Random(13)
    keys = [rng.randrange(KEYS) for _ in range(HTTP_ROWS)]
    for label, run, count in (
        (
            f"reference: bare aiohttp, {HTTP_CAPACITY} GETs in flight, no Spark",
            bare_gets,
            HTTP_ROWS // 2,
        ),
        (
            f"reference: bare aiohttp, one POST of {HTTP_CAPACITY} keys at a time, no Spark",
            bare_batches,
            HTTP_ROWS,
        ),
    ):
        rate = best_rate(partial(run_async, run, base, keys[:count]), repeat=REPEAT)
        print(f"  HTTP {label}: {rate:,.0f} rows/s")
        rows.append([label, rate, rate / bound, "-"])
    return table(
        [
            f"{HTTP_ROWS:,} rows, 1 partition, capacity {HTTP_CAPACITY}",
            "rows/s",
            f"of the bound {bound:,.0f}/s",
            "keys per lookup_many",
        ],
        rows,
    )


NOTES = """\
What each path does. All Redis paths read the same cached DataFrame (`order_id`, `user_id`,
`amount`; `user_id` uniform over {keys:,} keys, every one present in Redis as a JSON
document) and write it to the `noop` sink; a rate is rows over the wall time of the whole
Spark job, the best of {repeat} runs made in rounds (every path once, then again: the first
round also warms the JVM's JIT for each path), after a warm-up job and an untimed
lookup_join that opens each worker's Redis pool. `lookup_join` is
`enrich.spark.lookup_join(df, RedisLookup(url, key_template="user:{{}}", value="json",
schema=...), on="user_id", timeout=None)` on its defaults (capacity {capacity} rows in
flight, chunks of a quarter of that): mapInArrow, the columnar lane (keys as Arrow arrays,
distinct keys by dictionary encoding, Redis keys framed in RESP by Arrow compute and sent as
one pipeline of MGETs of at most 500 keys per chunk from each worker's asyncio loop, JSON
decoded in bulk by Arrow's reader on the task thread, rows aligned with `take`), typed
columns `name`, `tier`, `credit` added; "tuned" rows set another capacity. The SQL row is
`SELECT *, dim_user(user_id) AS u FROM orders` with `enrich.spark.sql.register_lookup` (an
Arrow UDF on the same engine, returning a struct, always ordered). (a) is a classic
row-at-a-time `F.udf` (pickled, not Arrow-optimized) returning the same struct: one redis-py
`GET` and one JSON decode per row, on {udf_rows:,} rows. (s16), (s64) are Spark's own answer
to slow row UDFs: the same GET in an Arrow-optimized `F.udf(..., useArrow=True)` run with
`spark.sql.execution.pythonUDF.arrow.concurrency.level` 16 and 64 (a thread pool of that
size per Python worker evaluates each batch's rows), on {udf_rows:,} rows; over HTTP the
same with one `requests` GET per row on a pooled session. (b) is `mapInPandas` doing one
redis-py (hiredis) `MGET` per Arrow batch (10,000 rows) and decoding each value into the
three typed columns. (d) is what a user who knows Arrow writes instead (and the design
`lookup_join`'s columnar lane started from): in `mapInArrow`, the Redis keys built by Arrow
compute, one sync `MGET` per batch, the values read at once by Arrow's JSON reader and
aligned by `take`; no request overlaps the decoding. (c) is `mapInPandas` yielding its input
unchanged (the ceiling); the mapInArrow passthrough is the same on the API `lookup_join` is
built on. `keys per lookup_many` is the join's own metric (rows with equal keys in flight
are coalesced). HTTP: `HttpLookup` against the local dimension service
(`enrich.demo.local.dimension_service`, one aiohttp process adding {latency:g} ms per
request), capacity {http_capacity} on one partition, so at most {http_capacity} rows are in
flight and Little's law caps the task at {bound:,.0f} rows/s; the batch variant POSTs up to
{http_capacity} keys to `/users/_batch`. The two reference rows drive the same service with
aiohttp alone, no Spark and no engine: on a 2-CPU machine the service process itself (and
the client's CPU) caps throughput well below the Little's-law bound.

Rerun: `./scripts/dev bench spark` (`ENRICH_BENCH_SPARK_ROWS=N` and
`ENRICH_BENCH_SPARK_HTTP_ROWS=N` change the sizes).
"""


def main() -> None:
    started = time.perf_counter()
    spark = start_spark()
    try:
        spark.range(10_000, numPartitions=PARTITIONS).mapInPandas(
            passthrough, "id bigint"
        ).write.format("noop").mode("overwrite").save()  # warm-up: JVM, workers, imports
        with local_redis() as url, dimension_service(latency=HTTP_LATENCY, users=KEYS) as base:
            load_users(url)
            print(f"Redis: {ROWS:,} rows, {PARTITIONS} partitions")
            redis_table, rates = redis_paths(spark, url)
            print(f"HTTP: {HTTP_ROWS:,} rows, 1 partition")
            http_table = http_section(spark, base)
    finally:
        spark.stop()
    path = write(
        "spark",
        "Spark lookup joins",
        [
            (
                f"Redis on loopback: {ROWS:,} rows, {PARTITIONS} partitions, local[2], noop sink",
                redis_table,
            ),
            ("Ratios against the targets", ratio_section(rates)),
            (f"HTTP dimension service, {HTTP_LATENCY * 1000:g} ms per request", http_table),
        ],
        notes=NOTES.format(
            keys=KEYS,
            repeat=REPEAT,
            capacity=CAPACITY,
            udf_rows=UDF_ROWS,
            latency=HTTP_LATENCY * 1000,
            http_capacity=HTTP_CAPACITY,
            bound=HTTP_CAPACITY / HTTP_LATENCY,
        ),
    )
    print(f"written to {path} in {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
