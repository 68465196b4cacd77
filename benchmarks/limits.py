"""Protecting the dimension store (issue 26), measured side by side in one run:

  (1) quota: four tasks (four processes, each its own loop, pool and limiter, as four
      Spark Python workers are) share a service with a quota of 1,000 requests/s (the
      issue's), then 200 (one this loaded 2-core machine's clients can exceed); keys
      split unevenly (40/30/20/10 %), as a skewed job's tasks are. Without a limit; with
      a per-process share (``rate_limit=`` 0.95 quota / 4 each); with one
      ``job_rate_limit`` of 0.95 quota for the job (a bucket in a loopback Redis). Every
      run retries (429 is retryable), as a job would. The service counts every request
      that arrives (served or refused) per 0.1 s.
  (2) knee (issue 33): one process against a service of the benchmark's own
      (benchmarks/knee_service.py, not the demo's, which the tests know): 20 ms up to
      16 requests in flight, ``(in flight / 16) ** 2`` times that above, 503 above 64.
      Fixed ``max_connections`` of 8-32 (and the default, 100, once) against
      ``concurrency="auto"`` with no other setting, in several rounds (the target is
      met in 4 of 5). The join's capacity is 4,096 rows (Spark's default is larger
      still), so the store's concurrency is the bound.
  (3) loopback Redis: ``RedisLookup`` on its defaults against ``concurrency="auto"``,
      and against a ``job_rate_limit`` never reached; interleaved rounds, best of each.

``ENRICH_BENCH_LIMITS_SECONDS`` sets the quota runs' length (default 10 s of quota).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import redis

import enrich
from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from enrich.demo.local import _serving, dimension_service, free_port, local_redis
from enrich.engine.runtime import run_sync
from enrich.protect import JobRateLimit

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

KNEE = 16  # requests in flight where the knee service's latency starts to grow
KNEE_LATENCY = 0.02  # seconds, up to the knee
KNEE_LIMIT = 64  # above this many in flight it answers 503
KNEE_LEVELS = (8, 12, 16, 20, 24, 32)
KNEE_LOOKUPS = int(os.environ.get("ENRICH_BENCH_LIMITS_KNEE_LOOKUPS", 2000))
KNEE_ROUNDS = int(os.environ.get("ENRICH_BENCH_LIMITS_KNEE_ROUNDS", 5))
KNEE_PASSES = int(os.environ.get("ENRICH_BENCH_LIMITS_KNEE_PASSES", 2))


@contextlib.contextmanager
def knee_service() -> Iterator[str]:
    """The knee service (benchmarks/knee_service.py) in a process of its own."""
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.knee_service", "--port", str(port)]
    command += ["--latency", str(KNEE_LATENCY), "--knee", str(KNEE), "--limit", str(KNEE_LIMIT)]
    with _serving(command, port, "the knee service", "benchmarks.knee_service", None):
        yield f"http://127.0.0.1:{port}"


def knee_run(base: str, keys: list[int], **settings: Any) -> dict[str, Any]:
    """One join of ``keys`` against the knee service: lookups per second, what the
    service saw (its p99, in flight, 503s), rows failed, the adaptive limit's end state."""
    urllib.request.urlopen(urllib.request.Request(base + "/_reset", method="POST")).read()
    source = HttpLookup(base + "/users/{}", schema=SCHEMA, **settings)
    started = time.perf_counter()
    metrics = join(keys, source)
    rate = len(keys) / (time.perf_counter() - started)
    run_sync(source.aclose, timeout=10)  # on the runtime loop, where its session lives
    seen = stats(base)
    return {
        "rate": rate,
        "p99": seen["p99"],
        "peak": seen["peak_in_flight"],
        "p99_in_flight": seen["p99_in_flight"],
        "refused": seen["refused"],
        "failed": metrics.errors.total(),
        "limit": metrics.concurrency_limit,
        "target": metrics.target_latency,
    }


def knee_round(
    base: str, keys: list[int], with_default: bool
) -> tuple[list[list[Any]], float, float]:
    """Every fixed level and auto, in ``KNEE_PASSES`` passes (each pass rotated by half
    the settings, so that a slow spell of the machine does not fall on one setting's
    runs only: auto's are never next to each other), then the fixed default once when
    asked; the table's rows (medians over the passes) and auto's throughput and p99
    against the best fixed level's."""
    settings: list[tuple[str, dict[str, Any]]] = [
        (f"fixed {level}", {"max_connections": level}) for level in KNEE_LEVELS
    ]
    settings.append(("auto", {"concurrency": "auto"}))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in settings}
    for n in range(KNEE_PASSES):
        shift = n * (len(settings) // 2) % len(settings)
        for name, chosen in settings[shift:] + settings[:shift]:
            knee_run(base, keys[:200], **chosen)  # warm up: connections, imports
            runs[name].append(knee_run(base, keys, **chosen))
    if with_default:
        runs["fixed default (100)"] = [knee_run(base, keys, max_connections=100)]
    medians = {name: _median_run(found) for name, found in runs.items()}
    best = max((medians[f"fixed {level}"] for level in KNEE_LEVELS), key=lambda r: r["rate"])
    auto = medians["auto"]
    rows = []
    for name, r in medians.items():
        rows.append(
            [
                name,
                r["rate"],
                r["p99"] * 1e3,
                r["p99_in_flight"],
                r["peak"],
                r["refused"],
                r["failed"],
                " / ".join(str(one["limit"]) for one in runs[name]) if name == "auto" else "",
                " / ".join(f"{one['target'] * 1e3:.1f}" for one in runs[name])
                if name == "auto"
                else "",
            ]
        )
    return rows, auto["rate"] / best["rate"], auto["p99"] / best["p99"]


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs of one setting (the peak: the highest)."""
    middle = {key: statistics.median(run[key] for run in runs) for key in ("rate", "p99")}
    middle["p99_in_flight"] = statistics.median(run["p99_in_flight"] for run in runs)
    middle["peak"] = max(run["peak"] for run in runs)
    middle["refused"] = sum(run["refused"] for run in runs)
    middle["failed"] = sum(run["failed"] for run in runs)
    return middle


def knee_section() -> str:
    keys = list(range(KNEE_LOOKUPS))
    texts, ratios = [], []
    with knee_service() as base:
        for n in range(KNEE_ROUNDS):
            load = os.getloadavg()[0]
            rows, throughput, p99 = knee_round(base, keys, with_default=n == 0)
            ratios.append((throughput, p99, load))
            print(
                f"knee round {n + 1}: {rows} auto/best {throughput:.2f}, p99 {p99:.2f}", flush=True
            )
            headers = ["concurrency", "lookups/s", "p99 ms in the service", "p99 in flight"]
            headers += ["peak in flight", "503s", "rows failed", "final limit", "target ms"]
            texts.append(
                f"Round {n + 1} (load {load:.1f} at its start): auto / best fixed throughput "
                f"{throughput:.2f}, p99 auto / p99 of the best fixed {p99:.2f}\n\n"
                + table(headers, rows)
            )
    met = sum(t >= 0.8 and p <= 2.0 for t, p, _ in ratios)
    summary = table(
        ["round", "load at start", "auto / best throughput", "auto p99 / best p99", "met"],
        [
            [n + 1, f"{load:.1f}", f"{t:.2f}", f"{p:.2f}", "yes" if t >= 0.8 and p <= 2.0 else "no"]
            for n, (t, p, load) in enumerate(ratios)
        ],
    )
    summary += (
        "\n\nTarget (auto >= 0.8 of the best fixed level's throughput, p99 <= 2x its "
        f"p99) met in {met} of {len(ratios)} rounds."
    )
    return summary + "\n\n" + "\n\n".join(texts)


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
    only = set(filter(None, os.environ.get("ENRICH_BENCH_LIMITS_ONLY", "").split(",")))
    sections: list[tuple[str, str]] = []
    with local_redis() as url:
        if not only or "quota" in only:
            for quota in (QUOTA, QUOTA / 5):  # the quota; one this machine can reach
                sections.append(
                    (
                        f"(1) Quota {quota:,.0f} requests/s, 4 tasks (keys 40/30/20/10 %), "
                        f"limit {quota * JOB_SHARE:,.0f}/s",
                        quota_section(url, quota),
                    )
                )
        if not only or "knee" in only:
            sections.append(
                (
                    f"(2) Knee at {KNEE} in flight ({KNEE_LATENCY * 1e3:g} ms below, 503 above "
                    f"{KNEE_LIMIT}), {KNEE_LOOKUPS:,} lookups a run, {KNEE_ROUNDS} rounds",
                    knee_section(),
                )
            )
        if not only or "redis" in only:
            sections.append(("(3) Loopback Redis, 100,000 lookups, best of 3", redis_section(url)))
    load = os.getloadavg()[0]
    path = write(
        "limits" if not only else "limits-" + "-".join(sorted(only)),
        "Protecting the dimension store: job-wide rate limit and adaptive concurrency",
        sections,
        notes=(
            f"Load average (1 min) at the end: {load:.1f}. (1): requests/quota and "
            "served/quota over the span the service saw requests; the max 5 s window "
            "counts every request (served or refused). (2): the knee service "
            "(benchmarks/knee_service.py, a process of its own); p99 of a served GET's "
            "time in the service, in flight as it counted at each arrival; 503s are "
            "retried (8 attempts); final limit and target: the adaptive limit's state in "
            "the join's metrics. The join's capacity is 4,096 rows, so the store's "
            "concurrency is the bound. (3): one process, join capacity 2,000, ordered.\n\n"
            "Rerun: `./scripts/dev bench limits` (ENRICH_BENCH_LIMITS_SECONDS=N; "
            "ENRICH_BENCH_LIMITS_ONLY=quota,knee,redis runs those sections only)."
        ),
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
