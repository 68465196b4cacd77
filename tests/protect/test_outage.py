"""The job rate limit through an outage of its Redis: four processes (as four Spark Python
workers) share one quota; the limiter's Redis is killed mid-job, then started again.

Bounds are what the service counted (arrival times stamped by its own thread) and what
the restarted Redis saw (its own clock); the test waits on counts, never on a client's
clock.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import pytest
import redis

from connectors.http import HttpLookup
from enrich import lookup_rows
from enrich.protect import JobRateLimit
from tests.support.arrivals import busiest_window
from tests.support.http_server import HttpTestServer
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(240)

PROCESSES = 4
KEYS = 100  # per process
RATE = 200.0  # the job's quota, requests per second
FALLBACK = 10.0  # per process while the limiter's Redis is gone
BOUND = 1.5 * PROCESSES * FALLBACK  # arrivals in any second of the outage, at most


def job(url: str, limit: JobRateLimit, keys: list[int], out: Any) -> None:
    """One process's part of the job: its rows all in flight at once (Spark's default
    capacity is 131,072 rows a task), the other options on their defaults."""
    try:
        source = HttpLookup(url, schema="name string", job_rate_limit=limit)
        rows = list(lookup_rows(({"id": str(key)} for key in keys), source, on="id", capacity=1000))
        answered = sum(row["name"] == f"user-{row['id']}" for row in rows)
        out.put(("done", len(rows), answered))
    except BaseException as exc:  # the parent reports it
        out.put(("failed", repr(exc), 0))


def kill(server: RedisServer) -> None:
    """SIGKILL, as a crashed or unplugged server: no goodbye to its clients."""
    process, server.process = server.process, None
    assert process is not None
    process.kill()
    process.wait()
    server.close_clients()


def first_limiter_call(server: RedisServer, found: list[float]) -> None:
    """The server-clock time of the first GCRA script call MONITOR sees (none found if
    the server stops first)."""
    client = server.client(socket_timeout=60)
    try:
        with client.monitor() as monitor:
            for command in monitor.listen():
                if str(command["command"]).upper().startswith("EVAL"):
                    found.append(float(command["time"]))
                    return
    except redis.RedisError:
        return


def test_an_outage_of_the_limiters_redis_keeps_to_the_fallback_at_every_moment(
    http_server: HttpTestServer, restartable_redis: RedisServer
) -> None:
    total = PROCESSES * KEYS
    for key in range(total):
        http_server.data[str(key)] = {"name": f"user-{key}"}
    limit = JobRateLimit(
        rate=RATE, redis_url=restartable_redis.url, key="enrich:rate:outage", fallback_rate=FALLBACK
    )
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    workers = [
        ctx.Process(
            target=job,
            args=(http_server.url("/users/{}"), limit, list(range(n, total, PROCESSES)), out),
        )
        for n in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    try:
        http_server.wait_for_requests(100, timeout=180)  # the job runs on the shared bucket
        kill(restartable_redis)
        killed = time.monotonic()
        at_kill = len(http_server.requests)
        # About 2.5 s of outage at the fallback's 40/s (a burst would bring them at once).
        http_server.wait_for_requests(at_kill + 100, timeout=60)
        restarted = time.monotonic()
        restartable_redis.start()
        seconds, micros = restartable_redis.client().time()
        back = seconds + micros / 1e6  # up again, by the server's clock
        found: list[float] = []
        watcher = threading.Thread(
            target=first_limiter_call, args=(restartable_redis, found), daemon=True
        )
        watcher.start()
        watcher.join(timeout=30)
        results = [out.get(timeout=120) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()

    starts = [request.started for request in http_server.requests]
    during = [t for t in starts if killed <= t <= restarted]
    assert restarted - killed >= 1.0, (
        f"{len(during)} requests in the {restarted - killed:.2f} s outage: faster than "
        f"{PROCESSES} x {FALLBACK:g}/s allows"
    )
    busiest = busiest_window(starts, 1.0, within=(killed, restarted))
    assert busiest <= BOUND, f"{busiest} arrivals in one second of the outage"
    assert results == [("done", KEYS, KEYS)] * PROCESSES  # no row failed
    # The limiter's Redis is used again within 2 s of its return (by its own clock).
    assert found, "the limiter never asked its Redis again"
    assert found[0] - back <= 2.0, f"used again {found[0] - back:.2f} s after its return"
    assert len(starts) == total
