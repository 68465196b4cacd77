"""Kafka pipelines against the project's broker (:mod:`enrich.demo.kafka_broker`), on
local[2], side by side in one run (one Spark session):

Part ``rates``: end-to-end latency at steady rates (:mod:`benchmarks._kafka_runs`), at
each rate in turn:

  (spark) Spark's own ``kafka -> kafka`` query, no Python stage (the value re-encoded
  in SQL), async progress tracking, trigger 0: the yardstick;
  (arrow) the same with a ``mapInArrow`` that returns its batches untouched: what a
  Python stage costs with no work in it;
  (join) ``kafka -> lookup_join -> kafka`` (Spark's Kafka sink), async progress
  tracking, trigger 0; the join against Redis (100,000 users, JSON values) on
  ``user_id = order_id * 7919 % 100000``, its defaults;
  (redis) ``kafka -> lookup_join -> redis`` sink under ``low_latency()`` (async
  progress tracking, trigger 0, the sink keyed by topic/partition/offset, the join run
  in the sink's write, workers warmed up);
  (kafka) ``kafka -> lookup_join -> kafka`` under ``low_latency(sink="kafka")``: the
  join run in the write of the ``kafka-alo`` sink (Python, at least once, as Spark's
  Kafka sink), so the rows cross from the JVM to Python once; each value the JSON of
  ``order_id``, ``ts``, ``name``; async progress tracking, trigger 0, workers warmed up;
  (redis-tasks, on request) the redis path with ``publish_from="tasks"``: each task
  publishes its own rows, the driver's commit only raises the marks.

Before the measured runs, one unmeasured run lets the JVM compile its hot paths (it held
back whichever path came first). Each run's record in ``results/kafka.json`` also keeps
its micro-batches' median phases (``durationMs``) and its slowest batch; the report ends
with the medians of a run's rounds.

Latency = the output record's CreateTime (Spark's producer; for the redis sink: the
output entry id, Redis' clock when the sink's commit, or a task, published it) - the
source record's CreateTime (the producer's), one machine's clock. "After 10 s": records
stamped 10 s or more after the producer's start. Every record must come out once
(Spark's Kafka sink is at-least-once: with no failure, none doubles). The load average
(1 min) is taken just before each row's input starts.

Part ``backlog`` (:mod:`benchmarks._kafka_backlog`): ``--records`` (1,000,000) in the
topic first, then ``kafka -> lookup_join -> kafka`` on the library's defaults (query
start included) against a hand-written 2-process consumer, on the same data; Spark's
own ``kafka -> kafka`` on the same defaults beside them, as the JVM side's floor.

Part ``levers`` (:mod:`benchmarks._kafka_levers`): Spark's own settings (pipelined
transfer to Python, Unix domain sockets, Arrow batch sizes, ``spark.buffer.size``), each
in a fresh session beside a baseline session in the same round, on ``--paths`` at
``--rates`` (``--levers`` picks them and their order, ``baseline`` first unless placed:
``./scripts/dev bench kafka --parts levers --rates 10000 --paths join,redis --rounds 2``).

Rerun: ``./scripts/dev bench kafka --rates 2000,10000,30000 --seconds 20`` (``--paths``,
``--parts rates,backlog``, ``--records``, ``--rounds``). Each run adds its rows to
``results/kafka.json`` (``--fresh`` starts it anew; a backlog replaces the last), so the
parts and further rounds can run apart; the report is written from it. Where the time
goes (a profile of the join's Python workers, what was tried): docs/kafka.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ._kafka_runs import LABELS, PATHS, each_once
from ._report import table, write

RECORD = Path(__file__).parent / "results" / "kafka.json"
TARGET_RATE = 10_000


def options(argv: list[str]) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m benchmarks kafka")
    parser.add_argument("--rates", default=env("ENRICH_BENCH_KAFKA_RATES", "2000,10000,30000"))
    seconds = float(env("ENRICH_BENCH_KAFKA_SECONDS", 20))
    parser.add_argument("--seconds", type=float, default=seconds, help="of input a run")
    parser.add_argument("--paths", default=",".join(PATHS[:5]))  # redis-tasks on request
    parser.add_argument("--parts", default="rates,backlog")
    parser.add_argument("--records", type=int, default=1_000_000, help="backlog size")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the paths at each rate")
    parser.add_argument("--fresh", action="store_true", help="drop the runs recorded before")
    parser.add_argument("--levers", default="no-pipelined,uds,arrow-2k,buffer-1m",
                        help="part levers: settings to compare with the baseline")  # fmt: skip
    args = parser.parse_args(argv)
    args.rates = [int(r) for r in args.rates.split(",")]
    args.paths = args.paths.split(",")
    args.parts = args.parts.split(",")
    args.levers = args.levers.split(",")
    from ._kafka_levers import LEVERS

    if any(lever not in LEVERS for lever in args.levers):
        parser.error(f"unknown lever in {args.levers}; choose from {', '.join(LEVERS)}")
    unknown = [p for p in args.paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown path {unknown[0]!r}; choose from {', '.join(PATHS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    from enrich.demo.kafka_broker import KafkaBroker, connector_jars
    from enrich.demo.local import local_redis
    from enrich.spark import register_data_sources

    from . import _kafka_backlog as backlog
    from ._kafka_runs import run_path
    from .lookup import load_users
    from .spark import start_spark

    args = options(argv or [])
    fresh = args.fresh or not RECORD.exists()
    record: dict[str, Any] = {} if fresh else json.loads(RECORD.read_text())
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="enrich-bench-kafka-") as tmp, local_redis() as url:
        work = Path(tmp)
        broker = KafkaBroker(work / "broker").start()
        try:
            load_users(url)
            jars = ",".join(str(j) for j in connector_jars())
            spark = start_spark(spark__jars=jars)
            register_data_sources(spark)
            if "levers" in args.parts:
                from . import _kafka_levers

                tried = record.get("levers", [])
                save = lambda: RECORD.write_text(json.dumps({**record, "levers": tried}, indent=1))  # noqa: E731
                spark = _kafka_levers.run(spark, jars, args, broker.bootstrap, url, work, when,
                                          tried, save)  # fmt: skip
                record["levers"] = tried
            if "rates" in args.parts:
                runs = record.get("runs", [])
                # Unmeasured, as in part levers: the session's first query runs while the
                # JVM compiles its hot paths, which held back whichever path came first.
                print("kafka: warming the JVM up (unmeasured)", flush=True)
                run_path(spark, broker.bootstrap, url, args.paths[-1], args.rates[0],
                         min(args.seconds, 10.0), "jit", work)  # fmt: skip
                for rate in args.rates:
                    for n in range(args.rounds):
                        turn = args.paths if n % 2 == 0 else args.paths[::-1]
                        for path in turn:
                            print(f"kafka: {path} at {rate:,}/s", flush=True)
                            tag = f"{rate}-{n}-{time.time_ns() % 10**9}"
                            result = run_path(spark, broker.bootstrap, url, path, rate,
                                              args.seconds, tag, work)  # fmt: skip
                            runs.append({"rate": rate, "path": path, "round": n, "when": when,
                                         "seconds": args.seconds, **result})  # fmt: skip
                            RECORD.write_text(json.dumps({**record, "runs": runs}, indent=1))
                record["runs"] = runs
            if "backlog" in args.parts:
                topic = f"backlog-{time.time_ns() % 10**9}"
                backlog.create_topic(broker.bootstrap, topic)
                print(f"kafka: filling a backlog of {args.records:,}", flush=True)
                backlog.fill(broker.bootstrap, topic, args.records)
                rows = {}
                for path in ("spark", "join", "hand"):
                    load = os.getloadavg()[0]
                    print(f"kafka: backlog, {path}", flush=True)
                    if path != "hand":
                        got = backlog.spark_path(spark, broker.bootstrap, url, topic, work,
                                                 join=path == "join")  # fmt: skip
                    else:
                        got = backlog.hand_path(broker.bootstrap, url, topic)
                    rows[path] = {**got, "load": load}
                record["backlog"] = {"records": args.records, "when": when, "rows": rows}
            spark.stop()
        finally:
            broker.stop()
    RECORD.write_text(json.dumps(record, indent=1))
    write("kafka", "Kafka pipelines: end-to-end latency and a backlog, beside Spark's own "
          "query and a hand-written consumer", report(record),
          notes=(__doc__ or "").split("\n\n", 1)[1])  # fmt: skip


def report(record: dict[str, Any]) -> list[tuple[str, str]]:
    sections = []
    order = ("rate", "when", "round")
    runs = sorted(record.get("runs", []),
                  key=lambda r: (*(r[k] for k in order), PATHS.index(r["path"])))  # fmt: skip
    if runs:
        rows = [[f"{r['rate']:,}", LABELS[r["path"]], r["produced"], each_once(r), r["p50"],
                 r["p99"], r["first_p99"], f"{r['batch_ms']:.0f} ms, {r['batch_rows']:,.0f} rows",
                 f"{r['when']}, {r['load']:.1f}"] for r in runs]  # fmt: skip
        sections.append((
            "End-to-end latency, each run its input's seconds (local[2], one session)",
            table(["records/s", "query", "records", "each once", "p50 ms (after 10 s)",
                   "p99 ms (after 10 s)", "p99 ms (first 10 s)", "median micro-batch",
                   "UTC, load before"], rows),
        ))  # fmt: skip
        sections.append(("Against Spark's own kafka -> kafka at the same rate, same round",
                         ratios(runs)))  # fmt: skip
        rounded = medians(runs)
        if rounded:
            sections.append(("Medians of the rounds of one run, against Spark's own", rounded))
    if "backlog" in record:
        sections.append(backlog_report(record["backlog"]))
    if record.get("levers"):
        from ._kafka_levers import report as levers_report

        sections.append(levers_report(record["levers"]))
    return sections


def ratios(runs: list[dict[str, Any]]) -> str:
    base = {(r["rate"], r["when"], r["round"]): r for r in runs if r["path"] == "spark"}
    rows = []
    for r in runs:
        own = base.get((r["rate"], r["when"], r["round"]))
        if r["path"] == "spark" or own is None:
            continue
        p50, p99 = r["p50"] / own["p50"], r["p99"] / own["p99"]
        met = ""
        if r["rate"] == TARGET_RATE:
            ok = p50 <= 1.25 and p99 <= 1.25 and r["p99"] <= 500 and each_once(r) == "yes"
            met = "yes" if ok else "no"
        rows.append([f"{r['rate']:,}", LABELS[r["path"]], f"{p50:.2f}x", f"{p99:.2f}x",
                     r["p99"], met or "-",
                     f"{r['when']}, {own['load']:.1f} / {r['load']:.1f}"])  # fmt: skip
    return table(["records/s", "query", "p50 / Spark's", "p99 / Spark's", "p99 ms",
                  "target met (10,000/s: both <= 1.25x, p99 <= 500 ms)",
                  "UTC, load before (Spark's / this)"], rows)  # fmt: skip


def medians(runs: list[dict[str, Any]]) -> str:
    """Per run (``when``) and rate with two rounds or more: each path's median p50 and
    p99 over its rounds, and their ratio to Spark's own medians; "" if none."""
    groups: dict[tuple[int, str], dict[str, list[dict[str, Any]]]] = {}
    for r in runs:
        groups.setdefault((r["rate"], r["when"]), {}).setdefault(r["path"], []).append(r)
    rows = []
    for (rate, when), paths in groups.items():
        own = paths.get("spark", [])
        if len(own) < 2:
            continue
        base = {q: statistics.median(r[q] for r in own) for q in ("p50", "p99")}
        for path, mine in sorted(paths.items(), key=lambda item: PATHS.index(item[0])):
            p50, p99 = (statistics.median(r[q] for r in mine) for q in ("p50", "p99"))
            once = all(each_once(r) == "yes" for r in mine)
            rows.append([f"{rate:,}", LABELS[path], len(mine), f"{p50:,.0f}", f"{p99:,.0f}",
                         f"{p50 / base['p50']:.2f}x", f"{p99 / base['p99']:.2f}x",
                         "yes" if once else "no", when])  # fmt: skip
    if not rows:
        return ""
    head = ["records/s", "query", "rounds", "median p50 ms", "median p99 ms", "p50 / Spark's",
            "p99 / Spark's", "each once, every round", "UTC"]  # fmt: skip
    return table(head, rows)


def backlog_report(b: dict[str, Any]) -> tuple[str, str]:
    labels = {
        "spark": "Spark's own kafka -> kafka, no Python stage, defaults (query start included)",
        "join": "kafka -> lookup_join -> kafka, library defaults (query start included)",
        "hand": "hand-written: 2 processes, consume / one MGET a batch / produce",
    }
    hand = b["rows"].get("hand")
    rows = []
    for path, r in b["rows"].items():
        rate = b["records"] / r["seconds"]
        ratio = (hand["seconds"] / r["seconds"]) if hand else math.nan
        rows.append([labels[path], f"{r['seconds']:.1f}", f"{rate:,.0f}", f"{ratio:.2f}x",
                     each_once(r), r["batches"] if r["batches"] is not None else "-",
                     f"{r['load']:.1f}"])  # fmt: skip
    return (
        f"A backlog of {b['records']:,} records, kafka -> kafka ({b['when']} UTC; target: "
        "the library >= 1.0x the hand-written consumer)",
        table(["path", "seconds", "records/s", "of hand-written", "each once",
               "micro-batches", "load before"], rows),
    )  # fmt: skip


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
