"""Crash runs of kafka -> lookup_join -> delta: a machine crash (SIGKILL of the job's
process group and, in the same instant, of Spark's Python daemons' and workers' groups)
at random moments while the job writes the table, then a restart from the same
checkpoint with ``maxOffsetsPerTrigger`` drawn anew; after the last kill the job drains
the topic. The table's rows are then counted per ``order_id`` (its data files read
through its transaction log, as a reader of the table sees them): 0 lost, 0 doubled.

Each kill's log line says where it landed against the two commits of a batch: how many
batches Delta had committed (its ``txn`` version) and Spark had recorded (the
checkpoint's ``commits/``). A kill that left Delta ahead of Spark makes the restart run
that batch again, which Delta skips by its transaction id: such kills are counted as
``replays``.

``python -m tests.exactly_once.delta_crash --runs 5 --kills 2`` prints each run's counts;
it needs the Delta venv's Python (``.venv-delta/bin/python``: pyspark 4.2 and Delta's
jars, see docs/delta.md).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

from enrich.demo.kafka_broker import KafkaBroker
from tests.support.crash_harness import crash_job
from tests.support.delta_table import column_counts, committed_batch, row_count
from tests.support.kafka_fixtures import create_topic, produce
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
LIMITS = (7, 19, 40, 90)  # maxOffsetsPerTrigger, drawn per start
RUN_TIMEOUT = 600.0  # one start of the job: 0.5-2 min, more on a loaded 2-core machine


@dataclass
class Outcome:
    kills: int = 0
    replays: int = 0  # kills after Delta's commit of a batch and before Spark's
    lost: int = 0
    doubled: int = 0
    rows: int = 0

    def line(self) -> str:
        return (
            f"{self.kills} kills ({self.replays} between Delta's commit and Spark's), "
            f"{self.rows} rows, {self.lost} lost, {self.doubled} doubled"
        )


def _spark_committed(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    names = commits.glob("*") if commits.exists() else []
    return max((int(p.name) for p in names if p.name.isdigit()), default=-1)


def one_run(
    workdir: Path, seed: int, kills: int, orders: int, log: Callable[[str], None] = print
) -> Outcome:
    """Start, kill and restart the job ``kills`` times, then let it drain; the counts."""
    rng = random.Random(seed)
    broker = KafkaBroker(workdir / "broker").start()
    store = RedisServer(workdir / "redis").start()
    outcome = Outcome()
    try:
        bootstrap, source = broker.bootstrap, "orders"
        create_topic(bootstrap, source, partitions=3)
        client = redis.Redis.from_url(store.url)
        with client.pipeline(transaction=False) as pipe:
            for i in range(orders):
                pipe.hset(f"user:{i}", "name", f"u{i}")
            pipe.execute()
        produce(bootstrap, source, [str(i).encode() for i in range(orders)])
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
        table, checkpoint = workdir / "table", workdir / "ck"

        def start() -> subprocess.Popen[bytes]:
            limit = str(rng.choice(LIMITS))
            log(f"  start (maxOffsetsPerTrigger={limit})")
            args = [bootstrap, source, store.url, str(table), str(checkpoint), limit]
            return subprocess.Popen(
                [sys.executable, "-m", "tests.exactly_once.delta_job", *args],
                cwd=ROOT, env=env, start_new_session=True,
                stdout=(workdir / "job.log").open("ab"), stderr=subprocess.STDOUT,
            )  # fmt: skip

        for _ in range(kills):
            before = row_count(table)
            if before >= orders:
                break
            job = start()
            wanted = min(orders, before + rng.randint(1, max(1, orders // 4)))
            deadline = time.monotonic() + RUN_TIMEOUT
            while job.poll() is None and time.monotonic() < deadline:
                if row_count(table) >= wanted:
                    break
                time.sleep(0.05)  # polling another process's files: no event to wait on
            if job.poll() is not None:
                log(f"  the job ended by itself ({job.returncode}) before the kill")
                continue
            groups = crash_job(job)
            outcome.kills += 1
            delta, spark = committed_batch(table), _spark_committed(checkpoint)
            replay = delta > spark
            outcome.replays += replay
            log(
                f"  machine crash (groups {groups}) with {row_count(table)} rows in the "
                f"table; batches committed by Delta {delta}, by Spark {spark}"
                + ("; the restart runs that batch again" if replay else "")
            )
        for _ in range(3):  # drain; a run that fails (a lost task) is started again
            job = start()
            if job.wait(timeout=RUN_TIMEOUT) == 0:
                break
            log(f"  the drain ended with {job.returncode}: started again")
        counts = column_counts(table, "order_id")
        outcome.rows = sum(counts.values())
        outcome.lost = sum(1 for i in range(orders) if counts[i] == 0)
        outcome.doubled = sum(n - 1 for n in counts.values() if n > 1)
        return outcome
    finally:
        store.stop()
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3, help="per run")
    parser.add_argument("--orders", type=int, default=300)
    parser.add_argument("--seed", type=int, default=70)
    args = parser.parse_args()
    total = Outcome()
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="delta-crash-") as folder:
            outcome = one_run(Path(folder), args.seed + run, args.kills, args.orders)
        print(f"run {run}: {outcome.line()}", flush=True)
        total.kills += outcome.kills
        total.replays += outcome.replays
        total.rows += outcome.rows
        total.lost += outcome.lost
        total.doubled += outcome.doubled
    print(f"total: {args.runs} runs, {total.line()}", flush=True)


if __name__ == "__main__":
    main()
