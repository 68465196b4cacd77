"""A crash harness for exactly-once: run the streaming job of ``tests/exactly_once/job.py``
as its own spark-submit process, SIGKILL it (or one of its Python workers) at chosen and
random moments, restart it from the same checkpoint, and check the sink at the end.

Kill points: ``before_write``, ``mid_write`` (only the Python worker writing, mid-batch),
``before_commit`` (between the batch's writes and its commit), ``between_steps`` (the
driver after the first of a commit's steps: part of the batch is published), ``after_commit``
(the commit took effect but Spark has not recorded it), and ``random`` (any moment). The
sink's test hook (:mod:`enrich.spark.sink.hooks`) holds the job at a named point until it
is killed. ``sink_restart`` gives the sink a Redis of its own and restarts it once, with
the job held at a hook, then lets the job go on: ``"volatile"`` (no persistence) between
batch 0's writes and its commit, so the commit finds its staging gone
(``StagingMismatch``) and the restarted query stages the batch again;
``"persistent"`` (AOF, fsync always) between two steps of batch 0's commit, so the
publish goes on, or its replay resumes it, from the cursor Redis kept.
While the job runs, a reader polls the sink and fails the run if it ever sees
a duplicate, an unknown record, a record disappear, or a staged row before its commit.

``"low-latency"`` runs the job under :func:`enrich.spark.low_latency` (async progress
tracking, the sink keyed by each row's ``stream_id``) and cuts the batches otherwise on
every restart: each run draws the source's ``maxEntriesPerTrigger`` anew, and Spark
re-plans the batches after the last offsets it wrote (at most once a second), so batch
ids come back with other rows. Besides the hooks (at a batch id after the sink's last),
it kills the driver at a random moment of the processing: once the sink holds a random
number of rows (``progress``).

A **machine crash** (``machine_crash``: every kill, or a share of them drawn per kill)
kills the driver's process group and, at the same instant, the process groups of
Spark's Python daemons and workers: PySpark's daemon puts itself and each worker it
forks in a process group of its own, so killing the driver's group alone leaves a
sink's commit running for 0.4-1.5 s after the JVM died (a "between steps" kill could
let the step finish). The groups are recorded when the kill comes, from the job's
process tree (every descendant of the spark-submit process, by ``/proc``), and each
kill's log line and the report say which kills were machine crashes and which groups
they killed.

``python -m tests.support.crash_harness --runs 5 --sink transactional`` is the soak
(``./scripts/dev soak``): it prints runs, kills survived, records checked, duplicates and
losses.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from .redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "exactly_once" / "job.py"
USERS = 7
POINTS = ("before_write", "mid_write", "before_commit", "between_steps", "after_commit", "random")
# Under async progress tracking the commit log lags (the batch ids of the hooks come from
# the sink's marker); a timed kill lands mostly in Spark's start-up, so "progress" kills
# once the sink holds a random number of rows. Every point kills the driver (the whole
# spark-submit process group).
LOW_LATENCY_POINTS = ("before_write", "before_commit", "between_steps", "after_commit",
                      "progress", "progress")  # fmt: skip
# Published from the tasks (publish_from="tasks") a commit has no steps: the kills land
# in a task's publish instead, the worker alone ("mid_write": Spark retries the task) or
# the whole job ("mid_publish"), after the task's first chunk.
FROM_TASKS_POINTS = ("before_write", "mid_write", "mid_publish", "before_commit",
                     "after_commit", "progress", "progress")  # fmt: skip
BATCH_LIMITS = (13, 29, 40, 57)  # maxEntriesPerTrigger drawn per run of "low-latency"
STREAM_SINKS = ("transactional", "low-latency", "kafka-low-latency")
LOW_LATENCY = ("low-latency", "kafka-low-latency")  # keyed by source, batches re-cut
PARTITIONS = 3  # of the kafka-low-latency scenario's topic
PERSISTENT = ["appendonly yes", "appendfsync always"]
# Where the sink's Redis is restarted, per kind of restart (batch 0: a Redis without
# persistence loses what earlier batches published too, which no sink can keep).
SINK_RESTART_AT = {"volatile": "before_commit:0", "persistent": "between_steps:0"}
RUN_TIMEOUT = 600.0  # a spark-submit run of the job: 1-2 min idle, 4-5 on a loaded 2-core machine


@dataclass
class Report:
    runs: int = 0
    kills: int = 0
    records: int = 0
    duplicates: int = 0
    losses: int = 0
    restarts: int = 0  # of the sink's Redis, with the job held at a hook
    violations: list[str] = field(default_factory=list)
    # low-latency: the kills after which the restart plans again entries the sink had
    # published (Spark's offsets log behind the sink), and how many such entries: each
    # is read again in a batch cut otherwise and must be skipped (replayed_entries)
    replanned: int = 0
    replayed: int = 0
    # the kills that were machine crashes (the Python daemons' groups killed too): each
    # as "point (driver group G + daemon groups [..])"
    machine: list[str] = field(default_factory=list)

    def add(self, other: Report) -> None:
        self.machine += other.machine
        self.runs += other.runs
        self.kills += other.kills
        self.restarts += other.restarts
        self.records += other.records
        self.duplicates += other.duplicates
        self.losses += other.losses
        self.violations += other.violations
        self.replanned += other.replanned
        self.replayed += other.replayed

    def summary(self) -> str:
        recut = (
            f", kills re-planned past published entries {self.replanned}, entries read "
            f"again {self.replayed}"
            if self.replanned
            else ""
        )
        crashes = f", of them machine crashes {len(self.machine)}" if self.machine else ""
        return (
            f"runs {self.runs}, kills survived {self.kills}{crashes}, "
            f"sink restarts {self.restarts}, "
            f"records checked {self.records}, "
            f"duplicates {self.duplicates}, losses {self.losses}, "
            f"reader violations {len(self.violations)}{recut}"
        )


class Reader(threading.Thread):
    """Polls the sink while the job runs; records every violation it sees."""

    def __init__(self, client: redis.Redis, sink: str, expected: set[int]) -> None:
        super().__init__(daemon=True)
        self.client, self.sink, self.expected = client, sink, expected
        self.seen: set[int] = set()
        self.violations: list[str] = []
        self.stopping = threading.Event()

    def visible(self) -> list[int]:
        if self.sink in STREAM_SINKS:
            return [int(f[b"order_id"]) for _, f in self.client.xrange("enriched", "-", "+")]
        keys = self.client.keys("enriched:*")
        return [int(k.decode().split(":")[1]) for k in keys]

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            try:
                ids = self.visible()
            except redis.RedisError:
                continue
            current = set(ids)
            if len(current) != len(ids):
                self.violations.append(f"duplicate visible: {len(ids) - len(current)} rows")
            if current - self.expected:
                self.violations.append(f"unknown records: {sorted(current - self.expected)[:5]}")
            if self.seen - current:
                self.violations.append(f"records vanished: {sorted(self.seen - current)[:5]}")
            self.seen = current


def staged_order_ids(client: redis.Redis) -> set[int]:
    """The order ids in staging lists (not yet committed)."""
    from enrich.spark.sink.redis.codec import unpack

    ids: set[int] = set()
    for key in client.keys("enrich:sink:*:staging:*"):
        for item in client.lrange(key, 0, -1):
            op = [i.decode("utf-8") for i in unpack(item)]  # the sink's packed operation
            fields = dict(zip(op[2::2], op[3::2], strict=True))
            ids.add(int(fields["order_id"]))
    return ids


def _uncommitted(client: redis.Redis, batch: int) -> bool:
    markers = [client.get(k) for k in client.keys("enrich:sink:*:committed")]
    return all(m is None or int(m) < batch for m in markers)


def _publishing(client: redis.Redis, batch: int) -> bool:
    """Whether a commit of ``batch`` started publishing (a plan with a cursor): then the
    replay's staging holds rows its first steps published, and its commit resumes."""
    plans = client.keys("enrich:sink:*:publishing")
    return any(client.hget(plan, "batch") == str(batch).encode() for plan in plans)


def last_planned(checkpoint: Path) -> int:
    """The last batch id in the checkpoint's offsets log (-1: none yet). Under async
    progress tracking a restart plans its batches from there, so the next ids are above
    it. (A sink keyed by the source record writes no committed-batch marker: its batch
    ids come back re-cut, lower too, and a marker would move backwards.)"""
    offsets = checkpoint / "offsets"
    logged = offsets.glob("*") if offsets.exists() else []
    return max((int(p.name) for p in logged if p.name.isdigit()), default=-1)


def replayed_entries(checkpoint: Path, source: redis.Redis, sink: redis.Redis) -> int:
    """After a kill under async progress tracking: how many source entries the sink
    published past the last offsets Spark logged. A restart plans its batches again from
    those offsets (with another ``maxEntriesPerTrigger``), so it reads these entries
    again in batches cut otherwise, and the sink must skip each of them."""
    marks = [v for k in sink.keys("enrich:sink:*:sources") for v in sink.hvals(k)]
    if not marks:
        return 0
    mark = max(marks, key=lambda m: tuple(int(x) for x in m.split(b"-")))
    offsets = checkpoint / "offsets"
    logged = [int(p.name) for p in offsets.glob("*") if p.name.isdigit()]
    after = "-"
    if logged:
        last = (offsets / str(max(logged))).read_text().splitlines()[-1]
        after = "(" + str(json.loads(last)["orders"])
    return len(source.xrange("orders", after, mark.decode()))


def replayed_records(checkpoint: Path, sink: redis.Redis) -> int:
    """As :func:`replayed_entries`, from Kafka: per partition, the offsets the sink
    published past the end Spark last logged (offsets run without gaps)."""
    marks: dict[str, int] = {}
    for key in sink.keys("enrich:sink:*:sources"):
        for stream, offset in sink.hgetall(key).items():
            marks[stream.decode().rsplit("/", 1)[1]] = int(offset)
    logged: dict[str, int] = {}
    offsets = checkpoint / "offsets"
    numbers = [int(p.name) for p in offsets.glob("*") if p.name.isdigit()]
    if numbers:
        last = (offsets / str(max(numbers))).read_text().splitlines()[-1]
        logged = {p: int(o) for p, o in json.loads(last)["orders"].items()}
    # a logged end offset is the next record to read: those from it up to the mark again
    return sum(max(0, mark + 1 - logged.get(p, 0)) for p, mark in marks.items())


def last_batch(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    done = [int(p.name) for p in commits.glob("*") if p.name.isdigit()] if commits.exists() else []
    return max(done, default=-1)


class Harness:
    """One scenario: a sink kind, a seed, a number of kills; :meth:`run` returns a Report."""

    def __init__(
        self,
        workdir: Path,
        sink: str,
        seed: int,
        *,
        kills: int = 3,
        orders: int = 240,
        restart_dimension: bool = False,
        sink_restart: str | None = None,
        log: Any = None,
        interval_ms: int | None = None,
        machine_crash: bool | float = False,
        publish_from: str = "driver",
        plan: tuple[str, ...] = (),
        machine_crash_at: tuple[str, ...] = (),
    ) -> None:
        if sink_restart not in (None, *SINK_RESTART_AT):
            raise ValueError(
                f"sink_restart must be one of {list(SINK_RESTART_AT)}, got {sink_restart!r}"
            )
        self.sink_restart = sink_restart
        self._restart_pending = sink_restart is not None
        self.workdir, self.sink, self.kills = workdir, sink, kills
        self.rng = random.Random(seed)
        self.orders = orders
        self.interval_ms = interval_ms  # low-latency: asyncProgressTrackingCheckpointIntervalMs
        self.publish_from = publish_from  # low-latency: the redis sink's publishFrom
        # True: every kill is a machine crash; a number: the share of kills that are
        self.machine_crash = float(machine_crash)
        # A plan names the kill points in order (one kill each) instead of drawing `kills`
        # of them; a kill at a point of machine_crash_at is a machine crash.
        known = {*POINTS, *LOW_LATENCY_POINTS, *FROM_TASKS_POINTS}
        unknown = [p for p in (*plan, *machine_crash_at) if p not in known]
        if unknown:
            raise ValueError(f"kill points must be among {sorted(known)}, got {unknown}")
        self.plan, self.machine_crash_at = plan, machine_crash_at
        self._point = ""  # the kill point of the run under way, for the report
        self.restart_dimension = restart_dimension
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.rows_at = 0  # a "progress" kill: once the sink holds this many rows
        self.checkpoint = workdir / "checkpoint"
        self.output = workdir / "output"
        self.hooks = workdir / "hooks"
        self.hooks.mkdir(parents=True, exist_ok=True)

    def run(self) -> Report:
        self.broker = None
        if self.sink == "kafka-low-latency":
            from enrich.demo.kafka_broker import KafkaBroker

            self.broker = KafkaBroker(self.workdir / "kafka").start()
        try:
            return self._run_servers()
        finally:
            if self.broker is not None:
                self.broker.stop()

    def _run_servers(self) -> Report:
        store = RedisServer(self.workdir / "store").start()
        # The dimension store persists, so a restart keeps its values (as a real one would).
        dimension = RedisServer(self.workdir / "dimension", extra_config=PERSISTENT).start()
        self.sink_server = store
        if self.sink_restart is not None:
            persist = PERSISTENT if self.sink_restart == "persistent" else []
            self.sink_server = RedisServer(self.workdir / "sink", extra_config=persist).start()
        try:
            return self._run(store, dimension)
        finally:
            store.stop()
            dimension.stop()
            self.sink_server.stop()

    def _run(self, store: RedisServer, dimension: RedisServer) -> Report:
        client = store.client()
        sink = self.sink_server.client()
        dim = dimension.client()
        for user in range(USERS):
            dim.set(f"user:{user}", json.dumps({"name": f"n{user}", "tier": "gold"}))
        if self.broker is not None:
            self._produce(self.broker.bootstrap)
        else:
            for i in range(self.orders):
                client.xadd("orders", {"order_id": i, "user_id": i % USERS, "amount": f"{i}.25"})
        self.report = report = Report()
        finished = False
        reader = None
        if self.sink != "file":
            reader = Reader(self.sink_server.client(), self.sink, set(range(self.orders)))
            reader.start()
        if self.sink_restart is not None:
            report.runs += 1
            hook = SINK_RESTART_AT[self.sink_restart]
            self.log(f"run: restart the sink's Redis ({self.sink_restart}) at {hook}")
            code = self._start_and_wait(store, dimension, hook, None, client=sink, point="")
            self.log(f"run ended: {code}")
            finished = code == 0
        # Spark's file sink has no hook: it is killed at random moments only.
        points = POINTS if self.sink != "file" else ("random",)
        if self.sink in LOW_LATENCY:
            points = LOW_LATENCY_POINTS if self.publish_from == "driver" else FROM_TASKS_POINTS
        plan = list(self.plan) or [self.rng.choice(points) for _ in range(self.kills)]
        for point in plan:
            report.runs += 1
            killed = self._run_once(store, dimension, sink, point)
            report.kills += killed
            finished = not killed  # the job ended before the kill point
        # The final, undisturbed run(s) until the job finishes, unless the last run did.
        for _ in range(4):
            if finished:
                break
            report.runs += 1
            finished = self._start_and_wait(store, dimension, None, None) == 0
        if not finished:
            raise AssertionError("the job did not finish after 4 clean runs")
        if reader is not None:
            reader.stopping.set()
            reader.join()
            report.violations += reader.violations
        self._check(sink, report)
        return report

    def _produce(self, bootstrap: str) -> None:
        """The orders into topic ``orders`` of PARTITIONS partitions, spread by order id."""
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("orders", PARTITIONS, 1)])["orders"].result(60)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(self.orders):
            value = json.dumps({"order_id": i, "user_id": i % USERS, "amount": i + 0.25})
            producer.produce("orders", value.encode(), partition=i % PARTITIONS)
        if producer.flush(60):
            raise AssertionError("the orders did not all reach the broker")

    def _run_once(
        self, store: RedisServer, dimension: RedisServer, client: redis.Redis, point: str
    ) -> int:
        if self.sink in LOW_LATENCY:  # the commit log lags: count from the offsets log
            batch = last_planned(self.checkpoint) + 1 + self.rng.randint(0, 2)
        else:
            batch = last_batch(self.checkpoint) + 1 + self.rng.randint(0, 1)
        hook = None if point in ("random", "progress") else f"{point}:{batch}"
        if point == "mid_publish":
            hook = f"mid_write:{batch}"
        delay = self.rng.uniform(3.0, 30.0) if point == "random" else None
        if point == "progress":
            done = client.xlen("enriched")
            self.rows_at = self.rng.randint(done + 1, max(done + 1, self.orders - 10))
        where = f"{self.rows_at} rows in the sink" if point == "progress" else f"batch {batch}"
        self._point = point
        self.log(f"run: kill at {point} ({where})")
        code = self._start_and_wait(store, dimension, hook, delay, client=client, point=point)
        if code != 0 and self.sink == "kafka-low-latency":
            replayed = replayed_records(self.checkpoint, client)
            self.report.replayed += replayed
            self.report.replanned += replayed > 0
            self.log(f"run: killed; the restart reads again {replayed} published records")
        elif code != 0 and self.sink in LOW_LATENCY:
            replayed = replayed_entries(self.checkpoint, store.client(), client)
            self.report.replayed += replayed
            self.report.replanned += replayed > 0
            self.log(f"run: killed; the restart reads again {replayed} published entries")
        return 0 if code == 0 else 1  # 0: the job finished before the kill point

    def _start_and_wait(
        self,
        store: RedisServer,
        dimension: RedisServer,
        hook: str | None,
        delay: float | None,
        *,
        client: redis.Redis | None = None,
        point: str = "",
    ) -> int | str:
        env = dict(os.environ)
        python = env.get("PYSPARK_PYTHON", sys.executable)
        env.update(
            PYSPARK_PYTHON=python,
            PYSPARK_DRIVER_PYTHON=python,
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            ENRICH_SINK_TEST_HOOK=hook or "",
            ENRICH_TEST_ASYNC_INTERVAL_MS=str(self.interval_ms or ""),
            ENRICH_TEST_PUBLISH_FROM=self.publish_from,
            ENRICH_SINK_TEST_HOOK_DIR=str(self.hooks),
        )
        if hook is not None:  # a mark an earlier run left would stop this one at once
            mark = self.hooks / hook.replace(":", "-")
            mark.unlink(missing_ok=True)
            mark.with_name(mark.name + ".go").unlink(missing_ok=True)
        submit = Path(python).parent / "spark-submit"
        command = [str(submit), "--master", "local[2]", "--driver-memory", "1g", str(JOB)]
        command += [store.url, dimension.url, self.sink, str(self.checkpoint), str(self.output)]
        limit = self.rng.choice(BATCH_LIMITS) if self.sink in LOW_LATENCY else 40
        command += [self.sink_server.url, str(limit)]
        if self.broker is not None:  # Spark's Kafka connector; the source is the broker
            from enrich.demo.kafka_broker import connector_jars

            jars = ",".join(str(jar) for jar in connector_jars())
            command[1:1] = ["--jars", jars]
            command[command.index(str(JOB)) + 1] = self.broker.bootstrap
        with open(self.workdir / "job.log", "ab") as log:
            job = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=self.workdir)  # fmt: skip
        started = time.monotonic()
        restart_at = started + self.rng.uniform(5.0, 20.0) if self.restart_dimension else None
        try:
            while job.poll() is None:
                now = time.monotonic()
                if now - started > RUN_TIMEOUT:
                    raise AssertionError(f"the job hung for {RUN_TIMEOUT}s; see job.log")
                if restart_at is not None and now >= restart_at:
                    self.log("restarting the dimension Redis")
                    dimension.restart()
                    restart_at = None
                if delay is not None and now - started >= delay:
                    self._kill(job)
                    return "killed"
                progressed = point == "progress" and client is not None
                if progressed and client.xlen("enriched") >= self.rows_at:
                    self._kill(job)
                    return "killed"
                if hook is not None:
                    mark = self.hooks / hook.replace(":", "-")
                    if mark.exists() and mark.read_text():
                        if self._restart_pending:
                            self._restart_sink_at_hook(mark)
                            hook = None
                            continue
                        self._kill_at_hook(job, mark, client, point)
                        return "killed"
                time.sleep(0.05)
            return job.returncode
        finally:
            if job.poll() is None:
                groups = python_groups(job.pid)
                _kill_groups([job.pid, *groups])
                job.wait()

    def _kill(self, job: subprocess.Popen[bytes]) -> None:
        """SIGKILL the driver's process group; a machine crash (drawn per kill, see
        ``machine_crash``) kills the Python daemons' and workers' groups in the same
        instant, recorded from the job's process tree just before."""
        machine = (
            self._point in self.machine_crash_at
            or self.machine_crash >= 1
            or (self.machine_crash > 0 and self.rng.random() < self.machine_crash)
        )
        groups = python_groups(job.pid) if machine else []
        _kill_groups([job.pid, *groups])
        job.wait()
        if machine:
            what = f"{self._point or 'kill'} (driver group {job.pid} + Python groups {groups})"
            self.report.machine.append(what)
            self.log(f"run: machine crash: {what}")

    def _restart_sink_at_hook(self, mark: Path) -> None:
        """Restart the sink's Redis while the job waits at ``mark``, then let it go on."""
        self.log(f"restarting the sink's Redis ({self.sink_restart}) at {mark.name}")
        self.sink_server.restart()
        self._restart_pending = False
        self.report.restarts += 1
        mark.with_name(mark.name + ".go").write_text("")

    def _kill_at_hook(
        self, job: subprocess.Popen[bytes], mark: Path, client: redis.Redis | None, point: str
    ) -> None:
        batch = int(mark.name.rsplit("-", 1)[1])
        # Keyed by source, a batch's staging may hold rows published already (a batch
        # re-cut): visible staged rows are no fault there; the reader checks the rest.
        watched = client is not None and self.sink == "transactional"
        if (
            point == "before_commit"
            and watched
            and _uncommitted(client, batch)
            and not _publishing(client, batch)
        ):
            # A replay of a batch that was committed already stages rows that are visible
            # (its commit will be skipped); a batch never committed must be invisible.
            staged = staged_order_ids(client)
            visible = {int(f[b"order_id"]) for _, f in client.xrange("enriched", "-", "+")}
            if staged & visible:
                raise AssertionError(
                    f"staged rows visible before commit: {sorted(staged & visible)[:5]}"
                )
        if point == "mid_write":
            # Only the Python worker writing the batch dies; Spark fails the task.
            os.kill(int(mark.read_text()), signal.SIGKILL)
            try:
                job.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
            return
        self._kill(job)
        stepping = watched or (client is not None and self.sink in LOW_LATENCY)
        if point == "between_steps" and stepping and not _publishing(client, batch):
            self.report.violations.append(f"killed between steps of batch {batch}, no plan left")

    def _check(self, client: redis.Redis, report: Report) -> None:
        rows = self._sink_rows(client)
        ids = [int(r["order_id"]) for r in rows]
        report.records += len(ids)
        report.duplicates += len(ids) - len(set(ids))
        report.losses += len(set(range(self.orders)) - set(ids))
        for row in rows:
            user = int(row["user_id"])
            if row.get("name") != f"n{user}":
                report.violations.append(f"wrong dimension value in {row}")
        left = client.keys("enrich:sink:*:staging*")
        left = [k for k in left if client.type(k) != b"set" or client.scard(k)]
        if left:
            report.violations.append(f"staging left: {left[:3]}")
        spans = sum(client.hlen(k) for k in client.keys("enrich:sink:*:pending"))
        if spans:  # published from the tasks: the last commit settles every span
            report.violations.append(f"{spans} spans of published rows left unsettled")

    def _sink_rows(self, client: redis.Redis) -> list[dict[str, Any]]:
        if self.sink in STREAM_SINKS:
            return [
                {k.decode(): v.decode() for k, v in f.items()}
                for _, f in client.xrange("enriched", "-", "+")
            ]
        if self.sink == "idempotent":
            return [
                {k.decode(): v.decode() for k, v in client.hgetall(key).items()}
                for key in client.keys("enriched:*")
            ]
        return file_sink_rows(self.output)


def crash_job(job: subprocess.Popen[bytes]) -> list[int]:
    """A machine crash of a job started in a session of its own: SIGKILL its process group
    and its Python daemons' and workers' groups (:func:`python_groups`) in one instant;
    returns the groups killed."""
    groups = [job.pid, *python_groups(job.pid)]
    _kill_groups(groups)
    job.wait()
    return groups


def python_groups(root: int) -> list[int]:
    """The process groups of ``root``'s descendants other than ``root``'s own (Spark's
    Python daemons and their workers: each in a group of its own), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    own = _group_of(root)
    groups: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        group = _group_of(pid)
        if group is not None and group not in (own, root) and group not in groups:
            groups.append(group)
    return sorted(groups)


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _kill_groups(groups: list[int]) -> None:
    """SIGKILL each process group, one right after the other (a group already gone is
    no error)."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


def file_sink_rows(output: Path) -> list[dict[str, Any]]:
    """The rows of the files Spark's file sink committed (its _spark_metadata log)."""
    files: set[str] = set()
    log = output / "_spark_metadata"
    for entry in sorted(log.glob("*")) if log.exists() else []:
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:
            record = json.loads(line)
            if record.get("action", "add") == "add":
                files.add(record["path"])
    rows: list[dict[str, Any]] = []
    for path in files:
        local = path.removeprefix("file://").removeprefix("file:")
        rows += [json.loads(line) for line in Path(local).read_text().splitlines() if line]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="exactly-once soak: kill, restart, check")
    parser.add_argument("--runs", type=int, default=3, help="scenarios per sink")
    parser.add_argument("--kills", type=int, default=4, help="kills per scenario")
    parser.add_argument("--orders", type=int, default=400)
    parser.add_argument(
        "--sink",
        action="append",
        choices=["transactional", "idempotent", "file", "low-latency", "kafka-low-latency"],
    )
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument(
        "--interval-ms",
        type=int,
        default=None,
        help="low-latency: Spark's asyncProgressTrackingCheckpointIntervalMs (default 1000); "
        "longer leaves more published entries for a restart to re-plan",
    )
    parser.add_argument(
        "--publish-from",
        choices=["tasks", "driver"],
        default="driver",
        help="low-latency: the redis sink's publishFrom (low_latency's default: driver)",
    )
    parser.add_argument(
        "--machine-crash",
        type=float,
        default=0.0,
        help="the share of kills that also kill Spark's Python daemons' process groups "
        "(a machine crash): 0 none, 1 every kill",
    )
    args = parser.parse_args()
    total = Report()
    for sink in args.sink or ["transactional", "idempotent", "file"]:
        for run in range(args.runs):
            seed = args.seed + run
            with tempfile.TemporaryDirectory(prefix=f"soak-{sink}-") as folder:
                restart = None
                if sink == "transactional" and run % 3:
                    restart = "volatile" if run % 3 == 1 else "persistent"
                harness = Harness(Path(folder), sink, seed, kills=args.kills, orders=args.orders,
                                  restart_dimension=run % 2 == 1, sink_restart=restart,
                                  interval_ms=args.interval_ms,
                                  machine_crash=args.machine_crash,
                                  publish_from=args.publish_from)  # fmt: skip
                report = harness.run()
            print(f"{sink} seed {seed}: {report.summary()}", flush=True)
            total.add(report)
    print(f"total: {total.summary()}")
    for crash in total.machine:
        print(f"machine crash: {crash}")
    for violation in total.violations:
        print(f"violation: {violation}")
    sys.exit(1 if total.duplicates or total.losses or total.violations else 0)


if __name__ == "__main__":
    main()
