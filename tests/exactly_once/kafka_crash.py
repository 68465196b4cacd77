"""Crash runs of kafka -> lookup_join -> kafka-eos: SIGKILL the job's whole process
group (the driver, Spark's JVM and its Python daemon and workers) at random moments
while it writes, restart it from the same checkpoint with ``maxOffsetsPerTrigger``
drawn anew (batches cut otherwise), half the runs under the low-latency profile, then
drain; a ``read_committed`` consumer then counts each order: 0 lost, 0 doubled.

A kill is a machine crash: the job's process group and, in the same instant, the groups
of Spark's Python daemons and workers (each in a group of its own, so a kill of the
driver's group alone would let them end by themselves). With ``broker_restarts`` the
broker is also restarted while the job writes (its transactions open or committing:
batches of 7-90 records commit several times a second), and the job is restarted when
it fails on the lost broker.

``python -m tests.exactly_once.kafka_crash --runs 3 --kills 3 [--broker-restarts 1]``
prints each run's counts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import redis

from enrich.demo.kafka_broker import KafkaBroker
from tests.support.crash_harness import crash_job
from tests.support.kafka_fixtures import create_topic, produce
from tests.support.kafka_reading import read_all
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def _count(bootstrap: str, topic: str) -> int:
    return len(read_all(bootstrap, topic))


def one_run(
    workdir: Path,
    seed: int,
    kills: int,
    orders: int,
    log=print,
    *,
    broker_restarts: int = 0,
) -> tuple[int, int, int]:
    """Returns (kills landed, lost, doubled); ``broker_restarts`` more rounds restart the
    broker, not the job, while it writes."""
    rng = random.Random(seed)
    broker = KafkaBroker(workdir / "broker").start()
    store = RedisServer(workdir / "redis").start()
    landed = 0
    try:
        bootstrap, source, target = broker.bootstrap, "orders", "enriched"
        create_topic(bootstrap, source, partitions=3)
        create_topic(bootstrap, target, partitions=3)
        client = redis.Redis.from_url(store.url)
        for i in range(orders):
            client.hset(f"user:{i}", "name", f"u{i}")
        produce(bootstrap, source, [str(i).encode() for i in range(orders)])
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
        checkpoint = str(workdir / "ck")

        def start(how: str) -> subprocess.Popen[bytes]:
            limit = str(rng.choice([7, 19, 40, 90]))
            args = [bootstrap, source, target, store.url, checkpoint, limit, how]
            log(f"  start ({how}, maxOffsetsPerTrigger={limit})")
            return subprocess.Popen(
                [sys.executable, "-m", "tests.exactly_once.kafka_job", *args],
                cwd=ROOT, env=env, start_new_session=True,
                stdout=(workdir / "job.log").open("ab"), stderr=subprocess.STDOUT,
            )  # fmt: skip

        rounds = ["kill"] * kills + ["broker"] * broker_restarts
        rng.shuffle(rounds)
        for what in rounds:
            before = _count(bootstrap, target)
            job = start(rng.choice(["low", "drain"]))
            wanted = before + rng.randint(1, max(1, orders // 4))
            deadline = time.monotonic() + 300
            while job.poll() is None and time.monotonic() < deadline:
                if _count(bootstrap, target) >= min(wanted, orders):
                    break
                time.sleep(0.5)
            if job.poll() is None and what == "kill":
                groups = crash_job(job)
                landed += 1
                log(f"  machine crash (groups {groups}) with {_count(bootstrap, target)} written")
            elif job.poll() is None:
                written = _count(bootstrap, target)
                broker.restart()
                log(f"  broker restarted with {written} written while the job ran")
                # the job rides it out or fails on it; either way it ends by draining
                # (a "low" job runs until killed: end it as a crash would)
                try:
                    code = job.wait(timeout=120)
                    log(f"  the job ended by itself with {code} after the broker's restart")
                except subprocess.TimeoutExpired:
                    crash_job(job)
                    log("  the job still ran 120 s after the broker's restart: crashed it")
            job.wait()
        for _ in range(3):
            job = start("drain")
            if job.wait(timeout=600) == 0:
                break
        values = [json.loads(v)["order_id"] for v in read_all(bootstrap, target)]
        counts = Counter(values)
        lost = sum(1 for i in range(orders) if counts[i] == 0)
        doubled = sum(n - 1 for n in counts.values() if n > 1)
        return landed, lost, doubled
    finally:
        store.stop()
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--orders", type=int, default=600)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--broker-restarts", type=int, default=0, help="per run")
    args = parser.parse_args()
    total = [0, 0, 0]
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="kafka-crash-") as folder:
            landed, lost, doubled = one_run(
                Path(folder), args.seed + run, args.kills, args.orders,
                broker_restarts=args.broker_restarts,
            )  # fmt: skip
        print(f"run {run}: {landed} kills, {lost} lost, {doubled} doubled", flush=True)
        total = [total[0] + landed, total[1] + lost, total[2] + doubled]
    print(f"total: {args.runs} runs, {total[0]} kills, {total[1]} lost, {total[2]} doubled")


if __name__ == "__main__":
    main()
