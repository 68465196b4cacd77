"""End-to-end latency of a streaming job at a steady input rate, exactly once, side by side.

A producer (this process) appends orders to a Redis stream at a steady rate, stamping
each entry with the wall clock (``ts``, seconds). The job enriches each order from Redis
(100,000 users, JSON values) and appends it to an output stream; an output entry's id is
the same machine's clock when the sink's commit wrote it, so its latency is that id's
milliseconds minus the stamp. Paths, each in a process of its own (a fresh Spark for each
Spark path, so none inherits another's warm workers), on local[2]:

  (defaults) ``redis-stream`` -> ``lookup_join`` -> ``redis`` sink, every option at its
  default (transactional, keyed by batch id; Spark's default trigger);
  (low) the same under the one switch: :func:`enrich.spark.low_latency` (async progress
  tracking, the sink keyed by each row's ``stream_id``, trigger 0, workers warmed up, the
  join run inside the sink's write);
  at 10,000/s only: (low-separate) the switch with ``join_in_sink=False``, the join in a
  stage of its own: what running it in the sink buys; (low-cold) the switch with
  ``warm=False``: what the warm-up buys; (low-pipelined) the switch in a session started
  with ``spark.python.udf.pipelined.enabled=true`` (Spark 4.3's opt-in pipelined
  transfer to Python workers, a setting of the SparkContext);
  (hand) what a user writes without Spark: two Python processes in a consumer group
  (``XREADGROUP`` pages of 1,000, ``MGET`` of their users, orjson, an ``XADD`` pipeline,
  ``XACK``): at-least-once.

A Spark path's producer starts once its query waits for data (its source is planned;
Python workers and the sink's first commit are still to start): "the first 10 s" are the
entries stamped in the producer's first 10 seconds. Every entry must come out exactly
once (counted, duplicates by ``order_id``). Per Spark path the table gives the median
micro-batch (``durationMs``) and its parts, from the query's progress.

Over a backlog (part ``backlog``): 300,000 entries in the source before the consumer
starts, the seconds from its start (a Spark path: from building the query, warm-up
included, in a session already running; the hand-written consumers: from starting their
processes) to the last output entry, each path twice in turn.

Rerun: ``./scripts/dev bench latency`` (``ENRICH_BENCH_LATENCY_RATES=2000,10000`` and
``ENRICH_BENCH_LATENCY_SECONDS=30`` set the rates and the seconds of input per run;
``ENRICH_BENCH_LATENCY_PATHS`` the paths, ``ENRICH_BENCH_LATENCY_ROUNDS`` how many times
each runs, ``ENRICH_BENCH_LATENCY_PARTS`` the parts: rates, backlog, stages, commit;
``ENRICH_BENCH_LATENCY_BACKLOG_PATHS`` the backlog's paths; besides the table's, the
explored ones of :data:`benchmarks._latency_runs.EXPLORED`, such as ``defaults-tasks``:
the plain redis sink keyed by ``stream_id``, each task publishing its own rows).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import redis

from ._latency_runs import PARTS, RATES, SECONDS, TARGET_RATE, backlog_path, run_path
from ._report import table, write
from .lookup import load_users

# -- what keying by the source record costs the commit ---------------------------------------

COMMIT_ROWS = 100_000


def commit_cost(url: str) -> str:
    """The real commit of ``COMMIT_ROWS`` staged stream entries (steps of 1,000 rows),
    keyed by batch id, by the source record with each row checked, and by the source
    record with the list's range (one stream in entry-id order, after its mark: the rows
    go unchecked, as a task staging one source partition in order gets), in turn, best
    of 3: the commit's wall time, and Redis' own CPU time (``INFO cpu``, the server's
    user + system seconds: what a loaded machine stretches least) a row."""
    import json

    from enrich.spark.sink.redis import two_phase
    from enrich.spark.sink.redis.codec import pack

    client = redis.Redis.from_url(url)
    ops = [
        pack(["x", "bench:out", "stream_id", f"{1_700_000_000_000 + i // 3}-{i % 3}",
              "order_id", str(i), "user_id", str(i % 1000), "amount", "12.5"])
        for i in range(COMMIT_ROWS)
    ]  # fmt: skip
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def server_cpu() -> float:
        info = client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    for _ in range(3):
        keyed = two_phase.SourceFields("stream_id")
        first = json.dumps(["*", f"{1_700_000_000_000}-0"])
        for label, source, ranges in (
            ("batch id", None, ()),
            ("source record, each row checked", keyed, ()),
            ("source record, the list's range after its mark", keyed, (first,)),
        ):
            client.delete("bench:out", *client.keys("enrich:sink:bench:*"))
            staging = two_phase.staging_key("bench", "0", 0, "a")
            for start in range(0, COMMIT_ROWS, 5_000):
                client.rpush(staging, *ops[start : start + 5_000])
            started, used = time.perf_counter(), server_cpu()
            two_phase.commit(client, "bench", "0", [(staging, COMMIT_ROWS)], marked=True,
                             step=1000, source=source, ranges=ranges)  # fmt: skip
            elapsed, used = time.perf_counter() - started, server_cpu() - used
            assert client.xlen("bench:out") == COMMIT_ROWS
            best[label] = min(best.get(label, elapsed), elapsed)
            cpu[label] = min(cpu.get(label, used), used)
    client.delete("bench:out", *client.keys("enrich:sink:bench:*"))
    client.close()
    base = cpu["batch id"]
    return table(
        ["keyed by", f"commit of {COMMIT_ROWS:,} entries, s", "us a row",
         "Redis CPU us a row", "Redis CPU vs batch id"],
        [[label, t, t / COMMIT_ROWS * 1e6, cpu[label] / COMMIT_ROWS * 1e6, cpu[label] / base]
         for label, t in best.items()],
    )  # fmt: skip


# -- one micro-batch, stage by stage, with and without async progress tracking --------------

ASYNC = {"asyncProgressTrackingEnabled": "true",
         "_asyncProgressTrackingOverrideSinkSupportCheck": "true"}  # fmt: skip


def stages(url: str) -> list[list[Any]]:
    """Median ``durationMs`` of micro-batches of 5,000 entries (after a first one), each
    query with Spark's logs written in line (sync) and off the critical path (async),
    in rounds (:mod:`benchmarks.microbatch`'s runner)."""
    from enrich.spark import register_data_sources

    from . import microbatch as mb
    from ._streams import ORDER_SCHEMA, fill_stream
    from .spark import start_spark

    def stream(spark: Any, _: str) -> Any:
        reader = spark.readStream.format("redis-stream").option("url", url)
        reader = reader.option("stream", mb.STREAM).option("maxEntriesPerTrigger", mb.ROWS)
        return reader.schema(ORDER_SCHEMA).load()

    def sink(asynchronous: bool, kind: str) -> Any:
        def build(df: Any, _: str, checkpoint: str) -> Any:
            name = "redis" if kind.startswith("redis") else kind
            writer = df.writeStream.format(name).option("checkpointLocation", checkpoint)
            if name == "redis":
                writer = writer.option("url", url).option("stream", "enriched")
                writer = writer.option("sourceIdColumn", "stream_id")
                writer = writer.option(
                    "publishFrom", "tasks" if kind == "redis-tasks" else "driver"
                )
            return writer.options(**ASYNC) if asynchronous else writer

        return build

    queries = [
        ("rate-micro-batch -> noop (Spark's floor)", mb._rate, None, "noop"),
        ("redis-stream -> noop", stream, None, "noop"),
        ("redis-stream -> lookup_join -> noop", stream, mb._join, "noop"),
        ("redis-stream -> redis sink (keyed by source)", stream, None, "redis"),
        ("redis-stream -> lookup_join -> redis sink (keyed by source)", stream, mb._join, "redis"),
        ("the same, publishFrom=tasks", stream, mb._join, "redis-tasks"),
    ]
    spark = start_spark()
    register_data_sources(spark)
    rounds, batches = 2, 8
    fill_stream(url, mb.ROWS * (batches + 4), stream=mb.STREAM)
    runs: dict[tuple[int, bool], list[dict[str, float]]] = {}
    try:
        for _ in range(rounds):
            for asynchronous in (False, True):
                for i, (_label, source, stage, kind) in enumerate(queries):
                    got = mb.run_query(spark, url, source, stage, sink(asynchronous, kind),
                                       batches // rounds)  # fmt: skip
                    runs.setdefault((i, asynchronous), []).extend(got)
    finally:
        spark.stop()
    rows = []
    for i, (label, *_) in enumerate(queries):
        row: list[Any] = [label]
        for asynchronous in (False, True):
            got = runs[(i, asynchronous)]
            row += [round(statistics.median(d.get(part, 0) for d in got))
                    for part in ("triggerExecution", "addBatch")]  # fmt: skip
        rows.append(row)
    return rows


# -- the report ----------------------------------------------------------------------------

LABELS = {
    "defaults": "redis-stream -> lookup_join -> redis sink (defaults)",
    "low": "the same, low_latency() (the one switch; the join runs in the sink)",
    "low-separate": "low_latency(join_in_sink=False): the join in a stage of its own",
    "low-cold": "the same, low_latency(warm=False)",
    "hand": "hand-written: 2 processes, XREADGROUP/MGET/XADD (at-least-once)",
    "low-pipelined": "low_latency(), spark.python.udf.pipelined.enabled=true",
    "low-1part": "low_latency(), partitionsPerStream=1",
    "low-tasks": 'low_latency(publish_from="tasks"): each task publishes its own rows',
    "defaults-tasks": 'the redis sink keyed by stream_id, publishFrom="tasks"',
}
PARTS_RUN = os.environ.get("ENRICH_BENCH_LATENCY_PARTS", "rates,backlog,stages,commit").split(",")
BACKLOG = int(os.environ.get("ENRICH_BENCH_LATENCY_BACKLOG", 300_000))
BACKLOG_PATHS = tuple(
    os.environ.get("ENRICH_BENCH_LATENCY_BACKLOG_PATHS", "defaults,low,low-tasks,hand").split(",")
)
BACKLOG_ROUNDS = 2
# Rounds of the paths at each rate (in turn, every other round backwards), for medians.
ROUNDS = int(os.environ.get("ENRICH_BENCH_LATENCY_ROUNDS", 1))
RECORD = Path(__file__).parent / "results" / "latency.json"


def main() -> None:
    """Runs the parts named by ``ENRICH_BENCH_LATENCY_PARTS`` (``rates``, ``stages``,
    ``commit``); with ``ENRICH_BENCH_LATENCY_KEEP=1`` the report keeps what earlier runs
    recorded (``results/latency.json``) for the parts and rates not run now, so a long
    run can be split in parts of under 10 minutes."""
    from enrich.demo.local import local_redis

    started = time.perf_counter()
    keep = os.environ.get("ENRICH_BENCH_LATENCY_KEEP") == "1" and RECORD.exists()
    record: dict[str, Any] = json.loads(RECORD.read_text()) if keep else {}
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    with local_redis() as url:
        if "commit" in PARTS_RUN:
            record["commit"] = {"table": commit_cost(url), "when": when,
                                "load": os.getloadavg()[0]}  # fmt: skip
        load_users(url)
        if "rates" in PARTS_RUN:
            runs = [r for r in record.get("runs", []) if r["rate"] not in RATES]
            for rate in RATES:
                paths = ["defaults", "low", "hand"]
                if rate == TARGET_RATE:
                    paths[2:2] = ["low-separate", "low-cold", "low-pipelined"]
                if os.environ.get("ENRICH_BENCH_LATENCY_PATHS"):
                    paths = os.environ["ENRICH_BENCH_LATENCY_PATHS"].split(",")
                turns = [paths if n % 2 == 0 else paths[::-1] for n in range(ROUNDS)]
                for path in (path for turn in turns for path in turn):
                    load = os.getloadavg()[0]
                    print(f"latency: {path} at {rate:,}/s (load {load:.1f})", flush=True)
                    result = run_path(url, path, rate)
                    runs.append({"rate": rate, "path": path, "result": result, "load": load,
                                 "after": os.getloadavg()[0], "when": when})  # fmt: skip
            record["runs"] = sorted(runs, key=lambda r: (r["rate"], list(LABELS).index(r["path"])))
        if "backlog" in PARTS_RUN:
            record["backlog"] = backlog(url, when)
        if "stages" in PARTS_RUN:
            load = os.getloadavg()[0]
            record["stages"] = {"rows": stages(url), "when": when, "load": load,
                                "after": os.getloadavg()[0]}  # fmt: skip
    RECORD.write_text(json.dumps(record, indent=1))
    path = write(
        "latency",
        "End-to-end latency at a steady rate: redis-stream -> lookup_join -> redis sink",
        report(record),
        notes=(__doc__ or "").split("\n\n", 1)[1],
    )
    print(f"written to {path} in {time.perf_counter() - started:.0f}s")


def backlog(url: str, when: str) -> dict[str, Any]:
    """Each of ``BACKLOG_PATHS`` over a backlog of ``BACKLOG`` entries, in rounds (the
    paths in turn, so that a slow spell of the machine falls on all of them)."""
    runs: dict[str, list[dict[str, Any]]] = {path: [] for path in BACKLOG_PATHS}
    loads = [os.getloadavg()[0]]
    for _ in range(BACKLOG_ROUNDS):
        for path in BACKLOG_PATHS:
            print(f"latency: {path} over a backlog of {BACKLOG:,}", flush=True)
            runs[path].append(backlog_path(url, path, BACKLOG))
            loads.append(os.getloadavg()[0])
    return {"runs": runs, "when": when, "loads": loads}


def backlog_report(record: dict[str, Any]) -> tuple[str, str]:
    runs = record["runs"]
    hand = max(r["rows_per_s"] for r in runs["hand"])
    rows = []
    for path, results in runs.items():
        best = max(results, key=lambda r: r["rows_per_s"])
        once = all(r["lost"] == 0 and r["duplicates"] == 0 for r in results)
        b = best["batches"]
        batches = f"{b.get('batches', 0)}, {b.get('rows', 0):,.0f}" if b else "-"
        seconds = ", ".join(f"{r['seconds']:.1f}" for r in results)
        ratio = f"{best['rows_per_s'] / hand:.2f}"
        rows.append([LABELS[path], f"{best['rows_per_s']:,.0f}", seconds, ratio,
                     "yes" if once else "no", batches])  # fmt: skip
    loads = ", ".join(f"{x:.1f}" for x in record["loads"])
    return (
        f"Over a backlog of {BACKLOG:,} entries ({record['when']} UTC, best of "
        f"{BACKLOG_ROUNDS} rounds, load {loads}; the target: the switch >= 1.5x hand-written)",
        table(["path", "rows/s (best)", "seconds, each round", "of hand-written",
               "exactly once (each round)", "micro-batches, median rows"], rows),
    )  # fmt: skip


def _medians(runs: list[dict[str, Any]]) -> list[list[Any]]:
    """Per rate and path run more than once: the median of each figure."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["rate"], run["path"]), []).append(run["result"])
    rows = []
    for (rate, path), results in groups.items():
        if len(results) < 2:
            continue
        batch = [r["batches"]["triggerExecution"] for r in results if r["batches"]]
        figures = [statistics.median(r[k] for r in results) for k in ("p50", "p99", "first_p99")]
        rows.append([f"{rate:,}", LABELS[path], len(results), *figures,
                     statistics.median(batch) if batch else "-"])  # fmt: skip
    return rows


def report(record: dict[str, Any]) -> list[tuple[str, str]]:
    sections = []
    if "backlog" in record:
        sections.append(backlog_report(record["backlog"]))
    runs = record.get("runs", [])
    if runs:
        rows = []
        for run in runs:
            r, b = run["result"], run["result"]["batches"]
            once = "yes" if r["lost"] == 0 and r["duplicates"] == 0 else (
                f"no: {r['lost']} lost, {r['duplicates']} doubled")  # fmt: skip
            batch = f"{b['triggerExecution']:.0f} ms, {b['rows']:.0f} rows" if b else "-"
            first = ", ".join(f"{ms:,}" for ms in b.get("first", [])) or "-"
            rows.append([f"{run['rate']:,}", LABELS[run["path"]], r["produced"], once, r["p50"],
                         r["p99"], r["first_p99"], batch, first,
                         f"{run['when']}, {run['load']:.1f}"])  # fmt: skip
        sections.append((
            f"local[2], {SECONDS:.0f} s of input per run",
            table(["entries/s", "path", "entries", "exactly once", "p50 ms (after 10 s)",
                   "p99 ms (after 10 s)", "p99 ms (first 10 s)", "median micro-batch",
                   "first 3 micro-batches, ms", "UTC, load before"], rows),
        ))  # fmt: skip
        medians = _medians(runs)
        if medians:
            sections.append((
                "Medians over rounds (the paths in turn, every other round backwards)",
                table(["entries/s", "path", "runs", "p50 ms (after 10 s)", "p99 ms (after 10 s)",
                       "p99 ms (first 10 s)", "median micro-batch ms"], medians),
            ))  # fmt: skip
        parts_rows = [
            [f"{run['rate']:,}", run["path"],
             *(f"{run['result']['batches'].get(p, 0):.0f}" for p in PARTS),
             run["result"]["batches"].get("batches", 0)]
            for run in runs if run["result"]["batches"]
        ]  # fmt: skip
        sections.append((
            "Median micro-batch by part (durationMs, batches with rows)",
            table(["entries/s", "path", *(f"{p} ms" for p in PARTS), "batches"], parts_rows),
        ))  # fmt: skip
        lows = [run["result"] for run in runs
                if run["rate"] == TARGET_RATE and run["path"] == "low"]  # fmt: skip
        if lows:
            p50, p99, first = (statistics.median(r[k] for r in lows)
                               for k in ("p50", "p99", "first_p99"))  # fmt: skip
            lost, doubled = sum(r["lost"] for r in lows), sum(r["duplicates"] for r in lows)
            checks = [
                ("p50 after 10 s <= 300 ms", round(p50), p50 <= 300),
                ("p99 after 10 s <= 500 ms", round(p99), p99 <= 500),
                ("p99 of the first 10 s <= 1,000 ms", round(first), first <= 1000),
                ("every entry exactly once", f"{lost} lost, {doubled} doubled",
                 lost == 0 and doubled == 0),
            ]  # fmt: skip
            sections.append((
                f"Targets (issue 43; medians of {len(lows)} runs of the switch)",
                table(["target (10,000/s, the one switch)", "measured", "met"],
                      [[name, value, "yes" if ok else "no"] for name, value, ok in checks]),
            ))  # fmt: skip
    if "stages" in record:
        st = record["stages"]
        sections.append((
            f"One micro-batch of 5,000 entries, stage by stage ({st['when']} UTC, load "
            f"{st['load']:.1f} before, {st['after']:.1f} after; medians of 8 batches in 2 "
            "rounds; the sink keyed by source)",
            table(["query", "sync: trigger ms", "sync: addBatch ms", "async: trigger ms",
                   "async: addBatch ms"], st["rows"]),
        ))  # fmt: skip
    if "commit" in record:
        c = record["commit"]
        sections.append((
            f"What keying by the source record costs the commit ({c['when']} UTC, load "
            f"{c['load']:.1f}; Redis time, best of 3)",
            c["table"],
        ))  # fmt: skip
    return sections


if __name__ == "__main__":
    main()
