"""``async_map`` against what users write by hand, per-row calls to a real HTTP service
(issue 32's "Done when"), side by side in one run on ``local[2]``.

The service (``benchmarks/score_service.py``) runs as two aiohttp processes of its own;
every contender POSTs each row's columns and adds ``score`` and ``label``
(``benchmarks/async_map_paths.py``), reading the same cached DataFrame of 2 partitions
(2 tasks) and writing Spark's ``noop`` sink: a rate is rows over the whole job's wall
time. Contenders take turns in rounds (every contender once, then again); each reports
its best round, and a ratio is given twice: of the best rounds, and as the median over
rounds of the ratio within a round (runs seconds apart, so a burst of load elsewhere
moves both sides alike). A target is judged on the latter.

  (a) 50 ms per call, capacity 50: ``async_map`` against the Little's-law bound
      tasks x capacity / latency (target >= 0.8);
  (b) 5 ms, capacity 100: ``async_map`` on its defaults against Spark's concurrent
      Arrow UDF at several concurrency levels (its best; target >= 1.3x) and a
      hand-written ``mapInPandas`` gathering a batch's calls under a semaphore of 100
      (target >= 1.0x); the service alone, driven without Spark, shows its own bound;
  (c) as (b) with 1% of calls (``id % 100 == 0``) at 500 ms: ``mode="unordered"``
      against the hand-written version (target >= 1.3x), and the ordered mode;
  (d) ``batch_size=50`` against the batch endpoint, against the per-row form of (b)
      in the same rounds (target >= 5x);
  (e) memory and accounting over 10M rows (:mod:`.async_map_memory`).

``ENRICH_BENCH_ASYNC_MAP_PARTS`` picks parts (default ``abcde``; a run of some parts keeps
the other parts' sections of the results file), ``ENRICH_BENCH_ASYNC_MAP_ROUNDS`` the
rounds (5; (a): 3), and the rows: ``ENRICH_BENCH_ASYNC_MAP_ROWS_A`` (20,000),
``..._ROWS`` ((b) and (c): 30,000), ``..._ROWS_UDF`` (the Arrow UDF: 6,000),
``..._ROWS_ORDERED`` ((c) ordered: 2,000), ``..._ROWS_BATCH`` ((d): 300,000),
``..._ROWS_MEMORY`` ((e): 10,000,000).
"""

from __future__ import annotations

import re
import time
from os import environ
from typing import Any

from ._async_map_runs import (
    HEADERS,
    TASKS,
    Contenders,
    calls,
    rounds,
    scored_input,
    uptime,
    verdict,
)
from ._report import RESULTS, table, write
from .async_map_paths import RETURNS, STRUCT, PostMany, PostRow, gather_per_batch, post_per_row
from .score_service import score_service, service_alone
from .spark import CONCURRENCY, start_spark

ENV = "ENRICH_BENCH_ASYNC_MAP"
PARTS = environ.get(f"{ENV}_PARTS", "abcde")
ROUNDS = int(environ.get(f"{ENV}_ROUNDS", 5))
ROWS_A = int(environ.get(f"{ENV}_ROWS_A", 20_000))
ROWS = int(environ.get(f"{ENV}_ROWS", 30_000))
ROWS_UDF = int(environ.get(f"{ENV}_ROWS_UDF", 6_000))
ROWS_ORDERED = int(environ.get(f"{ENV}_ROWS_ORDERED", 2_000))
ROWS_BATCH = int(environ.get(f"{ENV}_ROWS_BATCH", 300_000))
LEVELS = (16, 32, 64, 128)
FAST, SLOW, SLOW_EVERY = 0.005, 0.5, 100
BATCH, BATCH_CAPACITY = 50, 500
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"  # Spark's default: 10,000
OUTPUT = f"id bigint, user_id bigint, amount double, {RETURNS}"


# -- the parts -------------------------------------------------------------------------


def part_a(spark: Any) -> list[tuple[str, str]]:
    from enrich.spark import async_map

    latency, capacity = 0.05, 50
    bound = TASKS * capacity / latency
    with score_service(latency) as service:
        df = scored_input(spark, ROWS_A)
        mapped = async_map(df, PostRow(service.base), RETURNS, capacity=capacity, name="a")
        runs = rounds(spark, service, {"a": (mapped, ROWS_A, {})}, min(ROUNDS, 3))
        df.unpersist()
    best, median = runs.best("a"), runs.median("a")
    met = "met" if best / bound >= 0.8 else "MISSED"
    rows = [
        ["async_map(capacity=50), defaults", best, median, calls("a"), runs.cores_at_best("a")],
        ["target: >= 0.8 of the bound", f"{best / bound:.2f}: {met}", median / bound, "", ""],
    ]
    heading = (
        f"(a) 50 ms per call, capacity {capacity}, {TASKS} tasks: Little's-law bound "
        f"{bound:,.0f} rows/s; {ROWS_A:,} rows; {uptime()}"
    )
    headers = [HEADERS[0], "rows/s (best round)", "median round", *HEADERS[5:]]
    return [(heading, table(headers, rows))]


def part_bd(spark: Any, parts: str) -> list[tuple[str, str]]:
    from pyspark.sql import functions as F

    from enrich.spark import async_map

    with score_service(FAST) as service:
        alone, alone_cores = service_alone(service)
        print(f"  the service alone: {alone:,.0f} requests/s, {alone_cores:.2f} cores")
        df = scored_input(spark, ROWS)
        per_row = async_map(df, PostRow(service.base), RETURNS, capacity=100, name="b")
        contenders: Contenders = {"b": (per_row, ROWS, {})}
        frames = [df]
        if "b" in parts:
            hand = gather_per_batch(service.base)
            contenders["hand"] = (df.mapInPandas(hand, OUTPUT), ROWS, {})
            hand_uvloop = gather_per_batch(service.base, uvloop=True)
            contenders["hand uvloop"] = (df.mapInPandas(hand_uvloop, OUTPUT), ROWS, {})
            small = scored_input(spark, ROWS_UDF)
            frames.append(small)
            udf = F.udf(post_per_row(service.base), STRUCT, useArrow=True)
            arrow = small.select("*", udf("id", "user_id", "amount").alias("s"))
            contenders |= {f"arrow {n}": (arrow, ROWS_UDF, {CONCURRENCY: str(n)}) for n in LEVELS}
        if "d" in parts:
            big = scored_input(spark, ROWS_BATCH)
            frames.append(big)
            many = PostMany(service.base)
            batched = async_map(
                big, many, RETURNS, batch_size=BATCH, capacity=BATCH_CAPACITY, name="d"
            )
            contenders["d"] = (batched, ROWS_BATCH, {})
        runs = rounds(spark, service, contenders, ROUNDS)
        for frame in frames:
            frame.unpersist()
    load = uptime()
    ours = runs.row("async_map(capacity=100), defaults", "b", calls=calls("b"))
    sections = []
    if "b" in parts:
        levels = [f"arrow {level}" for level in LEVELS]
        runs.add_best_of("arrow", levels)
        top = max(LEVELS, key=lambda level: runs.best(f"arrow {level}"))
        rows = [ours]
        rows += [
            runs.row(f"Spark's Arrow UDF, concurrency.level {n}", f"arrow {n}", ("b", f"arrow {n}"))
            for n in LEVELS
        ]
        rows += [
            runs.row("Spark's Arrow UDF, its best level in each round", "arrow", ("b", "arrow")),
            runs.row("hand-written mapInPandas, gather, semaphore 100", "hand", ("b", "hand")),
            runs.row(
                "the same on uvloop (reference, no target)", "hand uvloop", ("b", "hand uvloop")
            ),
            [
                "the service alone: raw HTTP from 2 processes x 100 connections, no Spark",
                alone,
                "",
                f"{alone_cores / alone * 1e6:.0f} us of service CPU per call",
                "",
                "",
                alone_cores,
            ],
            verdict(f">= 1.3x the Arrow UDF's best (level {top} at best)", runs, "b", "arrow", 1.3),
            verdict(">= 1.0x the hand-written mapInPandas", runs, "b", "hand", 1.0),
        ]
        heading = (
            f"(b) 5 ms per call, capacity 100, {TASKS} tasks ({ROWS:,} rows; the Arrow UDF "
            f"{ROWS_UDF:,}); a ratio is async_map's rate over the contender's; {load}"
        )
        sections.append((heading, table(HEADERS, rows)))
    if "d" in parts:
        label = f"async_map(batch_size={BATCH}, capacity={BATCH_CAPACITY}), POST /score/_batch"
        rows = [
            ours,
            runs.row(label, "d", ("d", "b"), calls("d")),
            verdict(">= 5x the per-row form", runs, "d", "b", 5.0),
        ]
        heading = (
            f"(d) batched calls, 5 ms per call ({ROWS_BATCH:,} rows batched); a ratio is the "
            f"batched form's rate over the per-row form's; {load}"
        )
        sections.append((heading, table(HEADERS, rows)))
    return sections


def part_c(spark: Any) -> list[tuple[str, str]]:
    from enrich.spark import async_map

    with score_service(FAST, slow_every=SLOW_EVERY, slow_latency=SLOW) as service:
        df = scored_input(spark, ROWS)
        small = scored_input(spark, ROWS_ORDERED)
        fn = PostRow(service.base)
        contenders: Contenders = {
            "unordered": (async_map(df, fn, RETURNS, mode="unordered", name="c_u"), ROWS, {}),
            "hand": (df.mapInPandas(gather_per_batch(service.base), OUTPUT), ROWS, {}),
            "ordered": (async_map(small, fn, RETURNS, name="c_o"), ROWS_ORDERED, {}),
        }
        # For reference, no target: the same two where Spark hands Python batches of
        # 1,000 rows (the hand-written version then waits for a slow call 10x as often).
        small_batches = {ARROW_BATCH: "1000"}
        contenders["unordered 1k"] = (
            async_map(df, fn, RETURNS, mode="unordered", name="c_u1"),
            ROWS,
            small_batches,
        )
        contenders["hand 1k"] = (contenders["hand"][0], ROWS, small_batches)
        runs = rounds(spark, service, contenders, ROUNDS)
        df.unpersist()
        small.unpersist()
    mean = FAST * (1 - 1 / SLOW_EVERY) + SLOW / SLOW_EVERY
    bound = TASKS * 100 / mean
    rows = [
        runs.row('async_map(mode="unordered", capacity=100)', "unordered", calls=calls("c_u")),
        runs.row("hand-written mapInPandas, gather, semaphore 100", "hand", ("unordered", "hand")),
        runs.row(
            f'async_map(mode="ordered") ({ROWS_ORDERED:,} rows)',
            "ordered",
            ("unordered", "ordered"),
            calls("c_o"),
        ),
        verdict('mode="unordered" >= 1.3x the hand-written', runs, "unordered", "hand", 1.3),
        runs.row(
            'reference: async_map(mode="unordered"), Arrow batches of 1,000 rows',
            "unordered 1k",
            ("unordered 1k", "hand 1k"),
            calls("c_u1"),
        ),
        runs.row("reference: hand-written, Arrow batches of 1,000 rows", "hand 1k"),
    ]
    of_bound = ", ".join(
        f"{label} {runs.best(label) / bound:.2f}" for label in ("unordered", "hand", "ordered")
    )
    heading = (
        f"(c) 1% of calls (id % {SLOW_EVERY} == 0) at {SLOW * 1000:.0f} ms, the rest "
        f"{FAST * 1000:.0f} ms, capacity 100, {ROWS:,} rows: a ratio is unordered's rate "
        f"over the contender's; {uptime()}"
    )
    note = (
        f"Little's-law bound {bound:,.0f} rows/s ({TASKS} tasks x 100 / the mean latency "
        f"{mean * 1000:.2f} ms); of it, best rounds: {of_bound}."
    )
    return [(heading, table(HEADERS, rows) + "\n\n" + note)]


def kept_sections(parts: str) -> list[tuple[str, str]]:
    """The sections of the results file for the parts not run now."""
    path = RESULTS / "async_map.md"
    if not path.exists():
        return []
    text = path.read_text().split(f"\n{NOTES[:24]}")[0]  # the notes follow the sections
    found = re.findall(r"\n## (.+?)\n\n(.*?)(?=\n## |\Z)", text, re.S)
    others = {f"({p})" for p in "abcde" if p not in parts}
    return [(heading, body.strip()) for heading, body in found if heading[:3] in others]


def main() -> None:
    from .async_map_memory import part_e

    started = time.perf_counter()
    print(uptime())
    spark = start_spark()
    sections: list[tuple[str, str]] = []
    try:
        if "a" in PARTS:
            sections += part_a(spark)
        if "b" in PARTS or "d" in PARTS:
            sections += part_bd(spark, PARTS)
        if "c" in PARTS:
            sections += part_c(spark)
        if "e" in PARTS:
            sections += part_e(spark)
    finally:
        spark.stop()
    sections = sorted(kept_sections(PARTS) + sections, key=lambda s: s[0][:3])
    path = write("async_map", "async_map: per-row calls to an HTTP service", sections, NOTES)
    print(f"written to {path} in {time.perf_counter() - started:.0f}s")


NOTES = """\
What each contender does. Every one reads the same cached DataFrame (`id`, `user_id`,
`amount`, 2 partitions: 2 tasks on local[2]) and POSTs each row's three columns as JSON
to `/score` of the scoring service (`benchmarks/score_service.py`: two aiohttp processes
on uvloop sharing one port with SO_REUSEPORT, answering `{"score", "label"}` after the
part's latency; the tail of (c) is every row whose `id % 100 == 0`), adding `score` and
`label`, written to the `noop` sink. `async_map` runs `PostRow` (an `AsyncFunction`: one
aiohttp session per Python worker, opened on the worker's loop) on the library's
defaults (ordered, timeout 10 s, on_error "fail") plus the capacity named; while a
partition runs, its worker collects the youngest generation every 10,000 allocations
(since 2026-11-28; the hand-written loop keeps CPython's 700). Spark's Arrow
UDF is `F.udf(post_per_row, struct, useArrow=True)` with
`spark.sql.execution.pythonUDF.arrow.concurrency.level` set to each level in turn (a
thread pool of that size per batch evaluates its rows; one `requests` session per worker,
its pool of 128 connections shared by the threads). The hand-written `mapInPandas` opens
one event loop (asyncio's; uvloop's in the reference row) and one aiohttp session per
task and, per Arrow batch (Spark's 10,000 rows), gathers one POST per row under
`asyncio.Semaphore(100)`. The batched form POSTs lists of up to 50 rows to
`/score/_batch` (one result per row, in order). "service cores": CPU the service's
processes used during the best round, over its wall time (of the machine's 2). The
service-alone row drives the same service from 2 processes of raw HTTP/1.1 (asyncio
streams on uvloop, 100 keep-alive connections each, a POST and its answer in turn), no
Spark and no engine: what it answers when Spark's work is not on the machine, and its
own CPU per call. "calls p50 / p99": the map's own metrics over all rounds (a call's
time seen from the worker's loop, its wait for the loop included).
`tests/integration/test_async_map_references.py` checks that every contender gives the
same rows for the same input.

Rerun: `./scripts/dev bench async_map` (`ENRICH_BENCH_ASYNC_MAP_PARTS=abd` runs some
parts and keeps the others' sections; the row counts are in the module's docstring).
"""
