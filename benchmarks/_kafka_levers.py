"""Spark's own levers on the steady-rate runs of :mod:`benchmarks.kafka` (part
``levers``): each lever a fresh Spark session with its settings (most are read when the
SparkContext or a Python worker starts), the levers taking turns within a round (in
order, then reversed), each beside the baseline of its round.

The baseline is the library's session defaults (``enrich.spark.session()``, which turns
pipelined transfer on since these runs chose it; the runs before had Spark's default,
off: each run records its settings). The levers (pyspark 4.3.0's names, read from its
jars):

- ``pipelined`` / ``no-pipelined``: ``spark.python.udf.pipelined.enabled`` (Spark's
  default: off): the JVM writes a Python stage's input from a thread of its own while
  the task reads the output, and the worker reads its input ahead
  (``spark.python.udf.pipelined.queueDepth``, 2);
- ``uds``: ``spark.python.unix.domain.socket.enabled`` (off): the JVM and its Python
  workers talk over Unix domain sockets instead of loopback TCP;
- ``arrow-2k``: ``spark.sql.execution.arrow.maxRecordsPerBatch`` 2,000 (10,000 by
  default): smaller Arrow batches into each Python stage, so the join's lookups for one
  batch overlap the transfer of the next (the byte cap,
  ``spark.sql.execution.arrow.maxBytesPerBatch``, binds later than either at these rows'
  widths);
- ``buffer-1m``: ``spark.buffer.size`` 1 MiB (64 KiB): the JVM's buffered stream to a
  Python worker (``spark.sql.execution.python.udf.buffer.size`` falls back to it).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from ._kafka_runs import LABELS, run_path
from ._report import table

LEVERS: dict[str, dict[str, str]] = {
    "baseline": {},  # the library's session defaults (since 2026-12-06: pipelined on)
    "pipelined": {"spark.python.udf.pipelined.enabled": "true"},
    "no-pipelined": {"spark.python.udf.pipelined.enabled": "false"},
    "uds": {"spark.python.unix.domain.socket.enabled": "true"},
    "arrow-2k": {"spark.sql.execution.arrow.maxRecordsPerBatch": "2000"},
    "buffer-1m": {"spark.buffer.size": str(1 << 20)},
}

# Recorded with each run as the session had it (the baseline's changes with the defaults).
TRACKED = ("spark.python.udf.pipelined.enabled",)


def start(jars: str, lever: str) -> Any:
    """A fresh session with ``lever``'s settings."""
    from enrich.spark import register_data_sources

    from .spark import start_spark

    confs = {key.replace(".", "__"): value for key, value in LEVERS[lever].items()}
    spark = start_spark(spark__jars=jars, **confs)
    register_data_sources(spark)
    return spark


def run(
    spark: Any, jars: str, args: Any, bootstrap: str, url: str, work: Path, when: str,
    runs: list[dict[str, Any]], save: Any,
) -> Any:  # fmt: skip
    """Run ``args.levers`` and the baseline (first, unless ``args.levers`` places it) at
    ``args.rates`` on ``args.paths`` for ``args.rounds`` rounds, appending to ``runs``
    (``save()`` after each); returns a fresh baseline session for the parts that follow."""
    levers = args.levers if "baseline" in args.levers else ["baseline", *args.levers]
    # Unmeasured: the JVM's first session compiles its hot paths (JIT) while it runs, so
    # whichever lever came first fell behind at 10,000/s on 2 cores (2026-12-06, three
    # rounds, each first one); the JVM (and its compiled code) outlives the sessions.
    print("kafka: levers, warming the JVM up (unmeasured)", flush=True)
    run_path(spark, bootstrap, url, args.paths[0], args.rates[0], args.seconds, "jit", work)
    for rate in args.rates:
        for n in range(args.rounds):
            for lever in levers if n % 2 == 0 else levers[::-1]:
                spark.stop()
                spark = start(jars, lever)
                conf = spark.sparkContext.getConf()
                settings = {key: conf.get(key, "false") for key in TRACKED} | LEVERS[lever]
                for path in args.paths:
                    print(f"kafka: {lever}, {path} at {rate:,}/s", flush=True)
                    tag = f"{rate}-{n}-{time.time_ns() % 10**9}"
                    result = run_path(spark, bootstrap, url, path, rate, args.seconds, tag, work)
                    runs.append({"rate": rate, "path": path, "round": n, "when": when,
                                 "lever": lever, "settings": settings,
                                 "seconds": args.seconds, **result})  # fmt: skip
                    save()
    spark.stop()
    return start(jars, "baseline")


def report(runs: list[dict[str, Any]]) -> tuple[str, str]:
    """Each lever's p50 / p99 against its round's baseline on the same path and rate,
    medians over the rounds of one run (a run's code and defaults are its own)."""
    base = {(r["rate"], r["path"], r["when"], r["round"]): r for r in runs
            if r["lever"] == "baseline"}  # fmt: skip
    cells: dict[tuple[int, str, str, str], list[dict[str, Any]]] = {}
    for r in runs:
        cells.setdefault((r["rate"], r["path"], r["when"], r["lever"]), []).append(r)
    rows = []
    for (rate, path, _, lever), group in sorted(cells.items(), key=lambda kv: (
            kv[0][0], kv[0][1], kv[0][2], [*LEVERS, kv[0][3]].index(kv[0][3]))):  # fmt: skip
        pairs = [(r, base.get((r["rate"], r["path"], r["when"], r["round"]))) for r in group]
        ratio50 = [r["p50"] / b["p50"] for r, b in pairs if b]
        ratio99 = [r["p99"] / b["p99"] for r, b in pairs if b]
        once = all(r["lost"] == 0 and r["duplicates"] == 0 for r in group)
        recorded = group[0].get("settings", LEVERS.get(lever, {}))
        settings = ", ".join(f"{k}={v}" for k, v in recorded.items()) or "session defaults"
        rows.append([
            f"{rate:,}", LABELS[path], lever, settings, len(group),
            f"{statistics.median(r['p50'] for r in group):,.0f}",
            f"{statistics.median(r['p99'] for r in group):,.0f}",
            f"{statistics.median(ratio50):.2f}x" if lever != "baseline" else "-",
            f"{statistics.median(ratio99):.2f}x" if lever != "baseline" else "-",
            f"{statistics.median(r['batch_ms'] for r in group):,.0f}",
            "yes" if once else "no",
            ", ".join(sorted({r["when"] for r in group})) + ", load "
            + "/".join(f"{r['load']:.1f}" for r in group),
        ])  # fmt: skip
    return (
        "Spark's levers, each against the baseline of its round (medians over a run's rounds)",
        table(["records/s", "query", "lever", "settings", "rounds", "p50 ms", "p99 ms",
               "p50 / baseline", "p99 / baseline", "micro-batch ms", "each once",
               "UTC, load before each run"], rows),
    )  # fmt: skip
