"""Part (e) of ``benchmarks/async_map.py``: memory over 10M rows, and every row accounted
for.

``async_map`` runs :func:`~.async_map_paths.fast_row` (no network: the engine, the
Arrow conversions and the assembly are what is measured) over ``spark.range(N)`` in 2
partitions with ``on_error="error_column"``; rows with ``id % 1000`` 3 get an empty
list (dropped), 7 raise (the error column), 9 two rows (1:N). While the job runs, a
thread samples the resident set size of every Python worker of this Spark (the children
of its ``pyspark.daemon``, from /proc) every half second. The job's output is counted
by kind in the JVM (one aggregate, so every output row is checked without collecting
it) and compared with what ``N`` rows must give.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from ._async_map_runs import TASKS, uptime
from ._report import table
from .async_map_paths import DOUBLE, DROPPED, FAILED, fast_row

ROWS = int(os.environ.get("ENRICH_BENCH_ASYNC_MAP_ROWS_MEMORY", 10_000_000))
PERIOD = 0.5


DAEMONS = (b"pyspark.daemon", b"enrich.spark.session")


def _parent(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text.rsplit(")", 1)[1].split()[1])


def daemon_processes() -> dict[int, int]:
    """The processes of the Python daemon (``pyspark.daemon``, or the warm one,
    ``enrich.spark.session``: workers are forked from it), each with its parent."""
    daemons: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(name in (entry / "cmdline").read_bytes() for name in DAEMONS):
                daemons[int(entry.name)] = _parent(int(entry.name))
        except OSError:  # ended meanwhile
            continue
    return daemons


def python_workers(root: int, daemons: dict[int, int] | None = None) -> list[int]:
    """The Python workers under process ``root``: processes of the daemon's module whose
    parent is one too, and which fork none themselves (the warm daemon is itself
    started by a process of its module)."""
    daemons = daemon_processes() if daemons is None else daemons
    forking = set(daemons.values())
    workers = [pid for pid, parent in daemons.items() if parent in daemons and pid not in forking]
    return [pid for pid in workers if _descends(pid, root)]


def _descends(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        try:
            pid = _parent(pid)
        except OSError:
            return False
    return False


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class Sampler(threading.Thread):
    """Samples the workers' RSS every ``PERIOD`` seconds until stopped:
    ``samples[pid]`` is a list of (seconds since start, MB)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: dict[int, list[tuple[float, float]]] = {}
        self.forking: set[int] = set()  # daemons, seen before they forked: no workers
        self.stopped = threading.Event()
        self.started_at = time.perf_counter()

    def run(self) -> None:
        while not self.stopped.wait(PERIOD):
            now = time.perf_counter() - self.started_at
            daemons = daemon_processes()
            self.forking.update(daemons.values())
            for pid in python_workers(os.getpid(), daemons):
                mb = rss_mb(pid)
                if mb is not None:
                    self.samples.setdefault(pid, []).append((now, mb))


def expected(rows: int) -> dict[str, int]:
    """What ``rows`` ids must give, by kind: rows out, failed, dropped, doubled ids, and
    the sum of the ids kept with one row."""
    count = [len(range(k, rows, 1000)) for k in range(1000)]
    total = [sum(range(k, rows, 1000)) for k in range(1000)]
    ones = [k for k in range(1000) if k not in (DROPPED, FAILED, DOUBLE)]
    return {
        "rows": rows - count[DROPPED] + count[DOUBLE],
        "failed": count[FAILED],
        "dropped": count[DROPPED],
        "doubled": count[DOUBLE],
        "ones": sum(count[k] for k in ones),
        "ones_sum": sum(total[k] for k in ones),
    }


def counted(mapped: Any) -> dict[str, int]:
    """The output counted by kind, in one aggregate."""
    from pyspark.sql import functions as F

    kind = F.col("id") % 1000
    twice, error = F.col("twice"), F.col("enrich_error")
    reason = error == F.concat(F.lit("ValueError: refused row "), F.col("id").cast("string"))
    one = (twice == F.col("id") * 2) & error.isNull() & ~kind.isin(DROPPED, FAILED, DOUBLE)

    def rows_where(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    row = mapped.agg(
        F.count(F.lit(1)).alias("rows"),
        rows_where(reason & twice.isNull() & (kind == FAILED)).alias("failed"),
        rows_where(error.isNotNull()).alias("errors"),
        rows_where(kind == DROPPED).alias("dropped_present"),
        rows_where(
            (kind == DOUBLE) & ((twice == F.col("id") * 2) | (twice == F.col("id") * 2 + 1))
        ).alias("doubled_rows"),
        rows_where(one).alias("ones"),
        F.sum(F.when(one, F.col("id")).otherwise(0)).alias("ones_sum"),
    ).collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def part_e(spark: Any) -> list[tuple[str, str]]:
    from enrich.spark import async_map, statistics

    df = spark.range(ROWS, numPartitions=TASKS)
    mapped = async_map(df, fast_row, "twice bigint", on_error="error_column", name="e")
    sampler = Sampler()
    sampler.start()
    started = time.perf_counter()
    got = counted(mapped)
    elapsed = time.perf_counter() - started
    sampler.stopped.set()
    sampler.join()
    want = expected(ROWS)
    metrics = statistics("e")
    checks = [
        ["output rows", got["rows"], want["rows"]],
        ["rows in the error column, each with its reason", got["failed"], want["failed"]],
        ["rows with any error", got["errors"], want["failed"]],
        ["dropped rows (empty list) present", got["dropped_present"], 0],
        ["rows of the doubled ids (2 each)", got["doubled_rows"], 2 * want["doubled"]],
        ["rows of one output, value right", got["ones"], want["ones"]],
        ["sum of their ids", got["ones_sum"], want["ones_sum"]],
        ["metrics: rows in", metrics.rows_in, ROWS],
        ["metrics: errors", sum(metrics.errors.values()), want["failed"]],
        ["metrics: dropped (an empty list)", metrics.misses, want["dropped"]],
    ]
    accounted = all(a == b for _, a, b in checks)
    for check in checks:
        check.append("yes" if check[1] == check[2] else "NO")
    memory = []
    for pid, samples in sorted(sampler.samples.items()):
        if len(samples) < 4 or pid in sampler.forking:
            continue  # a worker of another job, or one that came and went
        mbs = [mb for _, mb in samples]
        tenth = next(mb for t, mb in samples if t >= samples[-1][0] / 10)
        memory.append([pid, len(samples), mbs[0], tenth, mbs[-1], max(mbs), mbs[-1] - tenth])
    heading = (
        f'(e) {ROWS:,} rows, a fast async function (no network), on_error="error_column": '
        f"{ROWS / elapsed:,.0f} rows/s; every row accounted for: "
        f"{'yes' if accounted else 'NO'}; {uptime()}"
    )
    headers = ["Python worker", "samples", "first MB", "at 10% of the run", "last MB", "peak MB"]
    body = (
        table(["check", "counted", "expected", "equal"], checks)
        + "\n\nResident set size of each Python worker, sampled every "
        + f"{PERIOD:g} s over the {elapsed:.0f} s run:\n\n"
        + table([*headers, "last - at 10%"], memory)
    )
    return [(heading, body)]
