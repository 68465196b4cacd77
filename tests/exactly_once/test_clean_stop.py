"""A clean stop: SIGTERM to `enrich run` while its job reads 2,000 records a second.

The job (redis-stream -> lookup_join on Redis -> an async function -> the redis sink,
exactly once) runs as users run it, a process of its own, while a producer appends
orders. Once the query runs steadily, the test sends SIGTERM to the job's process alone
(as a service manager does) while a micro-batch is in progress (planned in the
checkpoint's offsets log, not yet in its commits log) and checks: exit code 0 within
:data:`BOUND` seconds; that micro-batch is committed (the stop waited for it); each
step's metrics summary logged after the stop request; every ``open()`` of the async
function had its ``close()``; no process the job started is left; no connection of the
job is left open on Redis. Then the job restarts
from the same checkpoint, drains what was produced meanwhile, is stopped the same way
(idle by then), and the sink must hold every order exactly once, with no staging left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from tests.exactly_once.stop_functions import CLOSES, OPENS
from tests.support.processes import descendants, wait_gone
from tests.support.redis_server import RedisServer

pytest.importorskip("pyspark", reason="the clean-stop test needs pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
RATE = 2_000  # orders a second
USERS = 7
BOUND = 30.0  # seconds from SIGTERM to exit: docs/deploy.md states it and its measurement
TEST_CLIENT = "stop-test"  # the name of the test's own Redis connections


class Producer(threading.Thread):
    """Appends orders ``{order_id, user_id}`` to ``orders`` at :data:`RATE` a second, in
    chunks of a twentieth of a second, numbered from 0, until :meth:`finish`."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(url, client_name=TEST_CLIENT)
        self.sent = 0
        self._done = threading.Event()

    def run(self) -> None:
        chunk = RATE // 20
        start = time.monotonic()
        while not self._done.is_set():
            pipe = self.client.pipeline(transaction=False)
            for i in range(self.sent, self.sent + chunk):
                pipe.xadd("orders", {"order_id": i, "user_id": i % USERS})
            pipe.execute()
            self.sent += chunk
            # paced by the orders sent so far: a slow round is made up, not lost
            self._done.wait(max(0.0, start + self.sent / RATE - time.monotonic()))

    def finish(self) -> int:
        """Stop producing; the number of orders sent."""
        self._done.set()
        self.join()
        self.client.close()
        return self.sent


def job_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        f"""
name: clean-stop
source:
  format: redis-stream
  schema: "stream_id string, order_id long, user_id long"
  options: {{url: "{url}", stream: orders}}
stores:
  users: {{kind: redis, url: "{url}", key_template: "user:{{}}", value: json,
          schema: "name string, tier string", check_key: 1}}
joins:
  - {{store: users, on: user_id, how: left}}
  - {{function: "tests.exactly_once.stop_functions:Counted", args: {{url: "{url}"}},
      returns: "checked boolean"}}
sink:
  format: redis
  options: {{url: "{url}", stream: enriched}}
checkpoint: "{tmp_path / "checkpoint"}"
"""
    )
    return path


def start_job(config: Path, run: int) -> subprocess.Popen[bytes]:
    """``enrich run config`` in a session of its own (its process group is its own)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    log = config.parent / f"spark-{run}.log"
    with (config.parent / f"out-{run}.txt").open("wb") as out:  # the child keeps its copy
        return subprocess.Popen(
            [sys.executable, "-m", "enrich.cli", "run", str(config), "--log-file", str(log)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def batches(checkpoint: Path, log: str) -> list[int]:
    """The batch ids in the checkpoint's ``offsets`` (planned) or ``commits`` log."""
    folder = checkpoint / log
    return (
        sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []
    )


def wait_until(condition: Callable[[], bool], job: subprocess.Popen[bytes], what: str) -> None:
    """Poll ``condition`` until it holds; fail at once if the job ends first."""
    while not condition():
        if job.poll() is not None:
            raise AssertionError(f"the job ended (exit {job.returncode}) before {what}")
        time.sleep(0.2)


def output(config: Path, run: int) -> str:
    return (config.parent / f"out-{run}.txt").read_text(errors="replace")


def sigterm(
    job: subprocess.Popen[bytes], checkpoint: Path, mid_batch: bool
) -> tuple[float, int, dict[int, str]]:
    """SIGTERM to the job's process alone (with ``mid_batch``, once a micro-batch is in
    progress: planned, not yet committed); returns the seconds until it exited, the
    last batch planned when the signal came, and what was left of its process tree
    after it exited (allowing the JVM's Python daemon a few seconds to see it gone)."""
    if mid_batch:
        wait_until(
            lambda: batches(checkpoint, "offsets")[-1] > batches(checkpoint, "commits")[-1],
            job,
            "a micro-batch in progress",
        )
    tree = descendants(job.pid)
    planned = batches(checkpoint, "offsets")[-1]
    sent = time.monotonic()
    job.send_signal(signal.SIGTERM)
    try:
        job.wait(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        raise AssertionError(f"the job did not exit within {BOUND}s of SIGTERM") from None
    took = time.monotonic() - sent
    return took, planned, wait_gone(tree, timeout=15.0)


def stop_and_check(
    job: subprocess.Popen[bytes], config: Path, run: int, client: redis.Redis, mid_batch: bool
) -> float:
    checkpoint = config.parent / "checkpoint"
    took, planned, left = sigterm(job, checkpoint, mid_batch)
    said = output(config, run)
    assert job.returncode == 0, said[-3000:]
    request = "SIGTERM: stopping the query once its micro-batch in progress ends"
    assert request in said
    # the metrics flushed: each step's summary, after the stop was requested
    after = said.split(request, 1)[1]
    assert "enrich.jobs: join_0: rows" in after and "enrich.jobs: map_1: rows" in after
    assert planned in batches(checkpoint, "commits"), (
        f"batch {planned}, in progress when SIGTERM came, was not committed: {said[-2000:]}"
    )
    assert left == {}, f"processes left behind: {left}"
    assert int(client.get(OPENS) or 0) == int(client.get(CLOSES) or 0) > 0
    others = [c for c in client.client_list() if c.get("name") != TEST_CLIENT]
    assert others == [], f"connections of the job left open: {others}"
    print(f"run {run}: SIGTERM -> exit 0 in {took:.1f}s, batch {planned} committed")
    return took


def sink_order_ids(client: redis.Redis) -> list[int]:
    return [int(f[b"order_id"]) for _, f in client.xrange("enriched", "-", "+")]


def clean_stop_and_restart(tmp_path: Path) -> list[float]:
    """One scenario (see the module's docstring); the seconds each stop took."""
    server = RedisServer(tmp_path / "redis").start()
    producer = None
    job = None
    try:
        client = redis.Redis.from_url(server.url, client_name=TEST_CLIENT)
        for user in range(USERS):
            client.set(f"user:{user}", json.dumps({"name": f"n{user}", "tier": "gold"}))
        config = job_config(tmp_path, server.url)
        checkpoint = tmp_path / "checkpoint"
        producer = Producer(server.url)
        producer.start()
        job = start_job(config, 0)
        # Steady: two micro-batches after the first (which takes the start-up's backlog).
        wait_until(lambda: len(batches(checkpoint, "commits")) >= 3, job, "3 batches")
        took = [stop_and_check(job, config, 0, client, mid_batch=True)]

        job = start_job(config, 1)  # the producer went on meanwhile
        first = batches(checkpoint, "commits")[-1]
        wait_until(lambda: batches(checkpoint, "commits")[-1] > first, job, "a batch")
        sent = producer.finish()
        producer = None
        wait_until(lambda: client.xlen("enriched") >= sent, job, f"{sent} orders in the sink")
        took.append(stop_and_check(job, config, 1, client, mid_batch=False))  # drained: idle
        job = None

        ids = sink_order_ids(client)
        assert len(ids) == sent and set(ids) == set(range(sent)), (
            f"{len(ids)} rows for {sent} orders: {len(ids) - len(set(ids))} doubled, "
            f"{len(set(range(sent)) - set(ids))} lost"
        )
        staged = client.keys("enrich:sink:*:staging*")
        assert [k for k in staged if client.type(k) != b"set" or client.scard(k)] == []
        return took
    finally:
        if producer is not None:
            producer.finish()
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        server.stop()


@pytest.mark.parametrize(
    "run", [0, *(pytest.param(n, marks=pytest.mark.soak) for n in range(1, 5))]
)
def test_sigterm_stops_at_a_batch_boundary_and_a_restart_continues_exactly_once(
    tmp_path: Path, run: int
) -> None:
    clean_stop_and_restart(tmp_path)
