"""Spark's real-time mode from Python, against the micro-batch profile: Kafka ->
lookup join -> Redis on local[2], a one-node KRaft broker, the 100,000 users of
:mod:`benchmarks.lookup` in Redis, one Spark session, paths side by side at each rate:

  (redis) ``kafka -> lookup_join -> redis`` sink under ``low_latency()``: the
  micro-batch profile (async progress tracking, trigger 0, the join in the sink's write,
  the sink keyed by topic/partition/offset), as :mod:`benchmarks.kafka` runs it;
  (realtime) ``kafka -> writeStream.foreach(JoinWriter).trigger(realTime=...)``: the
  async lookup join inside a Python ``foreach`` writer, rows written to a Redis stream
  exactly once keyed by topic/partition/offset (:mod:`benchmarks._realtime_writer`);
  (realtime-pad) the same, each row padded with a constant string column so that the
  rows Spark pickles for the writer add up to ``--pad-rate`` MB/s: Spark's
  ``PythonForeachWriter`` hands rows to Python in pickled batches that double in rows
  until one passes 1 MiB (``SerDeUtil.AutoBatchedPickler``), so a row waits until
  ~1 MiB of rows followed it in its partition, or its real-time batch ends;
  (handover, on demand) the real-time query with no join: the writer appends each row
  as it comes, Spark's hand-over alone (the limit's smallest reproduction).

Latency = the output entry's id (Redis' clock when the row was written) - the source
record's CreateTime (the producer's), as :mod:`benchmarks.kafka` measures it; "after
10 s": records stamped 10 s or more after the producer's start. The load average
(1 min) is taken just before each row's input starts.

Rerun: ``./scripts/dev bench realtime --rates 2000,10000 --seconds 20 --rounds 3``
(``--paths``, ``--trigger`` "2 seconds", ``--pad-rate`` 8). Each run adds its rows to
``results/realtime.json`` (``--fresh`` starts it anew); the report is written from it.
What it found: docs/latency.md, "Real-time mode".
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from ._kafka_runs import LABELS as KAFKA_LABELS, each_once
from ._report import table, write

RECORD = Path(__file__).parent / "results" / "realtime.json"
PATHS = ("redis", "realtime", "realtime-pad", "handover")
LABELS = {
    "redis": f"micro-batch: {KAFKA_LABELS['redis']}",
    "realtime": "real-time mode: kafka -> foreach(join writer) -> redis",
    "realtime-pad": "real-time mode, rows padded: kafka -> foreach(join writer) -> redis",
    "handover": "real-time mode, no join: kafka -> foreach(writer) -> redis",
}
MIN_BATCH = "spark.sql.streaming.realTimeMode.minBatchDuration"


def options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks realtime")
    parser.add_argument("--rates", default="2000,10000")
    parser.add_argument("--seconds", type=float, default=20.0, help="of input a run")
    parser.add_argument("--paths", default=",".join(PATHS[:3]))
    parser.add_argument("--trigger", default="2 seconds", help="the real-time batch's length")
    parser.add_argument("--pad-rate", type=float, default=8.0,
                        help="MB/s of padding the padded path's rows add up to")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the paths at each rate")
    parser.add_argument("--fresh", action="store_true", help="drop the runs recorded before")
    args = parser.parse_args(argv)
    args.rates = [int(r) for r in args.rates.split(",")]
    args.paths = args.paths.split(",")
    unknown = [p for p in args.paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown path {unknown[0]!r}; choose from {', '.join(PATHS)}")
    return args


def realtime_query(trigger: str, pad: int, *, join: bool = True) -> Any:
    """A starter for :func:`benchmarks._kafka_runs.run_path`: the real-time query, its
    rows padded with ``pad`` bytes (none when 0), joined unless ``join`` is False."""
    from ._kafka_runs import source
    from ._realtime_writer import JoinWriter, user_id

    def start(spark: Any, bootstrap: str, url: str, path: str, topic: str, chk: str) -> Any:
        df = source(spark, bootstrap, topic)
        columns = ["order_id", "ts", user_id(), "topic", "partition", "offset"]
        if pad:
            columns.append(f"repeat('x', {pad}) AS pad")
        return (
            df.selectExpr(*columns)
            .writeStream.foreach(JoinWriter(url, f"{topic}-out", join=join))
            .outputMode("update")
            .option("checkpointLocation", chk)
            .trigger(realTime=trigger)
            .start()
        )

    return start


def seconds_of(trigger: str) -> float:
    number, unit = trigger.split()
    return float(number) * {"second": 1.0, "seconds": 1.0, "milliseconds": 1e-3}[unit]


def main(argv: list[str] | None = None) -> None:
    from enrich.demo.kafka_broker import KafkaBroker, connector_jars
    from enrich.demo.local import local_redis
    from enrich.spark import register_data_sources

    from ._kafka_runs import run_path
    from .lookup import load_users
    from .spark import start_spark

    args = options(argv or [])
    record: dict[str, Any] = (
        {} if args.fresh or not RECORD.exists() else json.loads(RECORD.read_text())
    )
    runs = record.get("runs", [])
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    minimum = str(int(seconds_of(args.trigger) * 1000))
    with tempfile.TemporaryDirectory(prefix="enrich-bench-rt-") as tmp, local_redis() as url:
        work = Path(tmp)
        broker = KafkaBroker(work / "broker").start()
        try:
            load_users(url)
            jars = ",".join(str(j) for j in connector_jars())
            spark = start_spark(spark__jars=jars, **{MIN_BATCH.replace(".", "__"): minimum})
            register_data_sources(spark)
            for rate in args.rates:
                pad = int(args.pad_rate * 1e6 / rate)
                for n in range(args.rounds):
                    for path in args.paths if n % 2 == 0 else args.paths[::-1]:
                        print(f"realtime: {path} at {rate:,}/s", flush=True)
                        tag = f"{rate}-{n}-{time.time_ns() % 10**9}"
                        start = None
                        if path != "redis":
                            padded = pad if path.endswith("pad") else 0
                            start = realtime_query(args.trigger, padded, join=path != "handover")
                        result = run_path(spark, broker.bootstrap, url, path, rate, args.seconds,
                                          tag, work, start=start)  # fmt: skip
                        padded = pad if path.endswith("pad") else 0
                        runs.append({"rate": rate, "path": path, "round": n, "when": when,
                                     "seconds": args.seconds, "trigger": args.trigger,
                                     "pad": padded, **result})  # fmt: skip
                        RECORD.write_text(json.dumps({**record, "runs": runs}, indent=1))
            spark.stop()
        finally:
            broker.stop()
    write("realtime", "Real-time mode from Python beside the micro-batch profile: "
          "kafka -> lookup join -> redis", report(runs),
          notes=(__doc__ or "").split("\n\n", 1)[1])  # fmt: skip


def report(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    order = sorted(runs, key=lambda r: (r["rate"], r["when"], r["round"], PATHS.index(r["path"])))
    rows = [[f"{r['rate']:,}", LABELS[r["path"]],
             f"{r['trigger']}, pad {r['pad']:,} B" if r["path"] != "redis" else "trigger 0",
             r["produced"], each_once(r), r["p50"], r["p99"], r["first_p99"],
             f"{r['when']}, {r['load']:.1f}"] for r in order]  # fmt: skip
    base = {(r["rate"], r["when"], r["round"]): r for r in runs if r["path"] == "redis"}
    ratios = []
    for r in order:
        own = base.get((r["rate"], r["when"], r["round"]))
        if r["path"] == "redis" or own is None:
            continue
        ratios.append([f"{r['rate']:,}", LABELS[r["path"]], f"{r['p50'] / own['p50']:.2f}x",
                       f"{r['p99'] / own['p99']:.2f}x", "yes" if r["p99"] < own["p99"] else "no",
                       f"{r['when']}, {own['load']:.1f} / {r['load']:.1f}"])  # fmt: skip
    return [
        ("End-to-end latency, each run its input's seconds (local[2], one session)",
         table(["records/s", "query", "settings", "records", "each once", "p50 ms (after 10 s)",
                "p99 ms (after 10 s)", "p99 ms (first 10 s)", "UTC, load before"], rows)),
        ("Against the micro-batch profile at the same rate, same round",
         table(["records/s", "query", "p50 / micro-batch", "p99 / micro-batch", "p99 beats it",
                "UTC, load before (micro-batch / this)"], ratios)),
    ]  # fmt: skip


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
