"""Where one task of a small Python stage spends its time: a bare ``mapInArrow`` against
``lookup_join`` (Redis on loopback, 1,000 users), 400 rows in 2 partitions to the
``noop`` sink (``ENRICH_BENCH_TIMELINE_PARTITIONS=1``: one task a job, none beside it,
written to ``results/task_timeline_1part.md``), jobs alternating (10 unmeasured, then
``ENRICH_BENCH_TIMELINE_JOBS``, 40).

Each worker is forked from a daemon that stamps its task's points
(:mod:`benchmarks._task_timeline_daemon`): the task's header arriving (Spark planned the
job, launched the task and sent it), the function read (unpickled), the first input
batch, the first output batch, the output's end, the accumulators sent; the driver
stamps the job's start and end. Per path, each phase's median and 90th percentile over
the tasks (ms), and the messages to the driver's metrics inbox. This is what a
micro-batch of a streaming query pays per task at a few hundred rows, without the
sources' and sinks' own work.

Rerun: ``python -m benchmarks task_timeline``.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ._report import table, write

ROWS = 400
USERS = 1_000
PHASES = (
    ("job start to the task's header", "start", "header"),
    ("header to the function read", "header", "read"),
    ("read to the first input batch", "read", "first_in"),
    ("first input batch to the first output", "first_in", "first_out"),
    ("first output to the output's end", "first_out", "out_end"),
    ("output's end to the accumulators sent", "out_end", "accumulators"),
    ("accumulators to the job's end", "accumulators", "end"),
    ("the job", "start", "end"),
)


def identity(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


def tasks(jobs: list[tuple[float, float]], lines: list[str]) -> list[dict[str, float]]:
    """Each task's points (one worker's stamps inside one job's start and end)."""
    stamps: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for line in lines:
        pid, event, *values = line.split()
        if event != "inbox":
            stamps[pid].append((float(values[0]), event))
    found = []
    for start, end in jobs:
        for points in stamps.values():
            task = {event: t for t, event in points if start <= t <= end}
            if {"header", "read", "first_in", "first_out", "out_end", "accumulators"} <= set(task):
                found.append({**task, "start": start, "end": end})
    return found


def summary(runs: list[dict[str, float]]) -> list[tuple[str, str, str]]:
    rows = []
    for name, a, b in PHASES:
        values = sorted((run[b] - run[a]) * 1000 for run in runs)
        p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
        rows.append((name, f"{statistics.median(values):.2f}", f"{p90:.2f}"))
    return rows


def main() -> None:
    import redis

    from connectors.redis import RedisLookup
    from enrich.demo.local import local_redis
    from enrich.spark import lookup_join, session

    count = int(os.environ.get("ENRICH_BENCH_TIMELINE_JOBS", "40"))
    partitions = int(os.environ.get("ENRICH_BENCH_TIMELINE_PARTITIONS", "2"))
    with tempfile.TemporaryDirectory(prefix="enrich-timeline-") as tmp, local_redis() as url:
        trace = os.path.join(tmp, "timeline")
        os.environ["ENRICH_TASK_TIMELINE"] = trace  # reaches the daemon through the JVM
        client = redis.Redis.from_url(url)
        client.mset({f"user:{i}": json.dumps({"name": f"n{i}", "tier": "gold"})
                     for i in range(USERS)})  # fmt: skip
        spark = session(
            "enrich-task-timeline", "local[2]",
            spark__ui__enabled="false", spark__ui__showConsoleProgress="false",
            spark__python__daemon__module="benchmarks._task_timeline_daemon",
        )  # fmt: skip
        try:
            df = spark.range(ROWS, numPartitions=partitions).selectExpr(
                "id AS order_id", f"id % {USERS} AS user_id"
            )
            users = RedisLookup(url, key_template="user:{}", value="json",
                                schema="name string, tier string")  # fmt: skip
            paths = {
                "bare mapInArrow": df.mapInArrow(identity, df.schema),
                "lookup_join": lookup_join(df, users, on="user_id"),
            }
            jobs: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
            for i in range(10 + count):
                for name, frame in paths.items():
                    start = time.time()
                    frame.write.format("noop").mode("overwrite").save()
                    if i >= 10:
                        jobs[name].append((start, time.time()))
            load = os.getloadavg()[0]
        finally:
            spark.stop()
        with open(trace) as f:
            lines = f.read().splitlines()
    sections = []
    for name, spans in jobs.items():
        runs = tasks(spans, lines)
        text = table(["phase", "median ms", "p90 ms"], summary(runs))
        sections.append((f"{name}: {len(runs)} tasks of {len(spans)} jobs", text))
    sends = sorted(
        (float(b) - float(a)) * 1000
        for pid, event, *stamps in (line.split() for line in lines)
        if event == "inbox"
        for a, b in [stamps]
    )
    if sends:
        p90 = sends[min(len(sends) - 1, int(len(sends) * 0.9))]
        text = table(["messages", "median ms", "p90 ms", "max ms"],
                     [(len(sends), f"{statistics.median(sends):.2f}", f"{p90:.2f}",
                       f"{sends[-1]:.2f}")])  # fmt: skip
        sections.append(("the lookup_join tasks' messages to the driver's metrics inbox", text))
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    sections.append(
        ("", f"local[2], {partitions} partition(s), load {load:.1f} at the end, {when} UTC")
    )
    for title, text in sections:
        print(f"{title}\n{text}\n")
    name = "task_timeline" if partitions == 2 else f"task_timeline_{partitions}part"
    write(name, "One task of a small Python stage, phase by phase", sections,
          __doc__ or "")  # fmt: skip


if __name__ == "__main__":
    main()
