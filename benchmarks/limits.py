"""Protecting the dimension store (issue 26), measured side by side in one run:

  (1) quota: four tasks (four processes, each its own loop, pool and limiter, as four
      Spark Python workers are) share a service with a quota of 1,000 requests/s (the
      issue's), then 200 (one this loaded 2-core machine's clients can exceed); keys
      split unevenly (40/30/20/10 %), as a skewed job's tasks are. Without a limit; with
      a per-process share (``rate_limit=`` 0.95 quota / 4 each); with one
      ``job_rate_limit`` of 0.95 quota for the job (a bucket in a loopback Redis). Every
      run retries (429 is retryable), as a job would. The service counts every request
      that arrives (served or refused) per 0.1 s.
  (2) knee: one process against a service whose latency grows past 200 requests in
      flight (5 ms below: the issue's figure; and 50 ms, where this client can reach the
      knee at all); fixed ``max_connections`` against ``concurrency="auto"`` with no
      other setting. The join's capacity is 4,096 rows (Spark's default is larger still),
      so the store's concurrency is the bound.
  (3) loopback Redis: ``RedisLookup`` on its defaults against ``concurrency="auto"``,
      and against a ``job_rate_limit`` never reached; interleaved rounds, best of each.

``ENRICH_BENCH_LIMITS_SECONDS`` sets the quota runs' length (default 10 s of quota).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import redis

import enrich
from connectors.http import HttpLookup
from connectors.ratelimit import JobRateLimit
from connectors.redis import RedisLookup
from enrich.demo.local import dimension_service, local_redis
from enrich.engine.runtime import run_sync

from ._report import table, write

QUOTA = 1_000.0
SECONDS = float(os.environ.get("ENRICH_BENCH_LIMITS_SECONDS", 10))
SHARES = (0.4, 0.3, 0.2, 0.1)
# The job's rate limit: 95% of the quota, headroom for requests bunched on the way.
JOB_SHARE = 0.95
CAPACITY = 4_096
SCHEMA = "name string, tier string, credit double"
RETRY = enrich.ExponentialBackoffRetry(max_attempts=8, initial_delay=0.2, max_delay=2.0)
WINDOW = 5.0


def join(
    keys: list[int], source: Any, capacity: int = CAPACITY, max_batch: int = 500
) -> enrich.JoinMetrics:
    """Every key through the engine's join (what a Spark task runs), in chunks; the
    join's metrics."""
    rows = capacity // 4
    chunks = ((n, keys[n : n + rows]) for n in range(0, len(keys), rows))
    it = enrich.lookup_chunks(
        chunks,
        source,
        capacity=capacity,
        retry=RETRY,
        on_error="null",
        timeout=60.0,
        max_batch=max_batch,
    )
    for _ in it:
        pass
    metrics: enrich.JoinMetrics = it.function.statistics()  # type: ignore[union-attr]
    return metrics


def stats(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base + "/_stats") as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


# -- (1) quota ---------------------------------------------------------------------------


def _task(
    base: str,
    limit: str,
    rate: float,
    redis_url: str,
    bucket: str,
    keys: list[int],
    barrier: Any,
    out: Any,
) -> None:
    kwargs: dict[str, Any] = {}
    if limit == "per-process share":
        kwargs["rate_limit"] = rate / len(SHARES)
    elif limit == "job-wide":
        kwargs["job_rate_limit"] = JobRateLimit(rate=rate, redis_url=redis_url, key=bucket)
    source = HttpLookup(base + "/users/{}", schema=SCHEMA, **kwargs)
    barrier.wait()
    started = time.perf_counter()
    metrics = join(keys, source)
    out.put((time.perf_counter() - started, metrics.errors.total(), metrics.retries))


def quota_run(limit: str, redis_url: str, quota: float) -> list[Any]:
    rate = quota * JOB_SHARE
    total = int(rate * SECONDS)
    ctx = multiprocessing.get_context("spawn")
    with dimension_service(latency=0.005, users=total, quota=quota) as base:
        barrier, out = ctx.Barrier(len(SHARES)), ctx.Queue()
        procs, start = [], 0
        bucket = f"bench:limits:{time.time()}"  # one bucket for the run's four tasks
        for share in SHARES:
            keys = list(range(start, start + int(total * share)))
            start += len(keys)
            args = (base, limit, rate, redis_url, bucket, keys, barrier, out)
            procs.append(ctx.Process(target=_task, args=args))
        for proc in procs:
            proc.start()
        results = [out.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
        seen = stats(base)
    buckets = {int(k): v for k, v in seen["buckets"].items()}
    first, last = min(buckets), max(buckets)
    span = (last - first + 1) / 10
    width = int(WINDOW * 10)
    windows = [
        sum(buckets.get(b, 0) for b in range(s, s + width)) / WINDOW
        for s in range(first, max(first, last - width + 1) + 1)
    ]
    requests = seen["served"] + seen["refused"]
    failed = sum(r[1] for r in results)
    job_seconds = max(r[0] for r in results)
    return [
        limit,
        f"{max(windows) / quota:.3f}" if span >= WINDOW else "run < 5 s",
        f"{requests / span / quota:.3f}",
        f"{seen['served'] / span / quota:.3f}",
        seen["refused"],
        failed,
        f"{job_seconds:.1f}",
    ]


def quota_section(redis_url: str, quota: float) -> str:
    limits = ("none", "per-process share", "job-wide")
    rows = [quota_run(limit, redis_url, quota) for limit in limits]
    for row in rows:
        print("quota:", row, flush=True)
    headers = [
        "limit",
        "max 5 s window / quota",
        "requests / quota",
        "served / quota",
        "429s",
        "rows failed",
        "job s",
    ]
    return table(headers, rows)


# -- (2) knee ------------------------------------------------------------------------


def knee_run(base: str, keys: list[int], **settings: Any) -> tuple[float, float, Any]:
    """Lookups per second, the p99 of a GET's time in the service (where the knee
    shows), and the join's metrics."""
    source = HttpLookup(base + "/users/{}", schema=SCHEMA, **settings)
    before = stats(base)["served"]
    started = time.perf_counter()
    metrics = join(keys, source)
    rate = len(keys) / (time.perf_counter() - started)
    run_sync(source.aclose, timeout=10)  # on the runtime loop, where its session lives
    seen = stats(base)
    assert seen["served"] - before >= len(keys)
    return rate, seen["p99"], metrics


def knee_section(latency: float, lookups: int) -> tuple[str, dict[str, float]]:
    keys = list(range(lookups))
    rows: list[list[Any]] = []
    best = (0.0, 0.0)
    for setting in (25, 50, 100, 200, 400, 800, "auto"):
        # A service of its own per setting: its latency percentiles are this run's.
        with dimension_service(latency=latency, users=lookups, knee=200) as base:
            chosen: dict[str, Any] = (
                {"concurrency": "auto"} if setting == "auto" else {"max_connections": setting}
            )
            knee_run(base, keys[:300], **chosen)  # warm up: connections, imports
            if setting == "auto":
                rate, p99, metrics = knee_run(base, keys, concurrency="auto")
                target = (metrics.target_latency or 0.0) * 1e3
                peak = stats(base)["peak_in_flight"]
                rows.append(
                    ["auto", rate, p99 * 1e3, peak, metrics.concurrency_limit, f"{target:.1f}"]
                )
            else:
                rate, p99, _ = knee_run(base, keys, max_connections=setting)
                peak = stats(base)["peak_in_flight"]
                rows.append([f"fixed {setting}", rate, p99 * 1e3, peak, "", ""])
                best = max(best, (rate, -p99))
    figures = {"auto/best": rate / best[0], "p99 auto/best": p99 / -best[1]}
    print(f"knee {latency}: {rows} {figures}", flush=True)
    headers = ["concurrency", "lookups/s", "p99 ms in the service", "peak in flight"]
    headers += ["final limit", "client's target ms"]
    text = table(headers, rows)
    text += (
        f"\n\nauto / best fixed throughput: {figures['auto/best']:.2f}; "
        f"p99 auto / p99 of the best fixed: {figures['p99 auto/best']:.2f}"
    )
    return text, figures


# -- (3) loopback Redis ----------------------------------------------------------------


def redis_section(url: str, lookups: int = 100_000, rounds: int = 3) -> str:
    client = redis.Redis.from_url(url)
    with client.pipeline(transaction=False) as pipe:
        for n in range(0, 100_000, 5_000):
            pipe.mset({f"user:{i}": json.dumps({"name": f"u{i}"}) for i in range(n, n + 5_000)})
        pipe.execute()
    keys = [(i * 7919) % 100_000 for i in range(lookups)]
    common = {"key_template": "user:{}", "value": "json", "schema": "name string"}
    paths: dict[str, Callable[[], Any]] = {
        "fixed (default)": lambda: RedisLookup(url, **common),
        "concurrency='auto'": lambda: RedisLookup(url, concurrency="auto", **common),
        "job_rate_limit=10M keys/s": lambda: RedisLookup(url, job_rate_limit=1e7, **common),
    }
    best: dict[str, float] = dict.fromkeys(paths, 0.0)
    for make in paths.values():  # warm up
        join(keys[:20_000], make(), capacity=2_000)
    for _ in range(rounds):
        for name, make in paths.items():
            started = time.perf_counter()
            join(keys, make(), capacity=2_000)
            best[name] = max(best[name], lookups / (time.perf_counter() - started))
    base = best["fixed (default)"]
    rows = [[name, rate, f"{rate / base:.3f}"] for name, rate in best.items()]
    print("redis:", rows, flush=True)
    return table(["RedisLookup", "lookups/s (best round)", "vs fixed"], rows)


def main() -> None:
    sections: list[tuple[str, str]] = []
    with local_redis() as url:
        for quota in (QUOTA, QUOTA / 5):  # the quota; one this machine can reach
            sections.append(
                (
                    f"(1) Quota {quota:,.0f} requests/s, 4 tasks (keys 40/30/20/10 %), "
                    f"limit {quota * JOB_SHARE:,.0f}/s",
                    quota_section(url, quota),
                )
            )
        for latency, lookups in ((0.005, 20_000), (0.05, 20_000)):
            text, _ = knee_section(latency, lookups)
            sections.append((f"(2) Knee at 200 in flight, {latency * 1e3:g} ms below", text))
        sections.append(("(3) Loopback Redis, 100,000 lookups, best of 3", redis_section(url)))
    load = os.getloadavg()[0]
    path = write(
        "limits",
        "Protecting the dimension store: job-wide rate limit and adaptive concurrency",
        sections,
        notes=(
            f"Load average (1 min) at the end: {load:.1f}. (1): requests/quota and "
            "served/quota over the span the service saw requests; the max 5 s window "
            "counts every request (served or refused). (2): p99 of a GET's time in the "
            "service (the knee's latency; a row's own latency is the join's capacity over "
            "the throughput, 4,096 rows in flight, whatever the store's concurrency); peak "
            "in flight as the service saw it (warm-up included); final limit and the "
            "client's target (twice the unloaded latency the client measures, its own "
            "scheduling delays included): the adaptive limit's state in the join's metrics. "
            "(3): one process, join capacity 2,000, ordered.\n\n"
            "Rerun: `./scripts/dev bench limits` (ENRICH_BENCH_LIMITS_SECONDS=N)."
        ),
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
