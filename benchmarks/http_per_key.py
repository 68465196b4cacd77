"""HTTP per-key GETs alone: the library against bare aiohttp on the same 5 ms service.

The per-key rows of ``benchmarks/lookup.py``'s HTTP section, without the Redis and batch
parts, repeated as separate runs (each run its own service process and its own rounds),
so one figure per run can be reported on a shared machine:

  (a) bare aiohttp, a semaphore of the join's capacity, one GET per key;
  (b) ``lookup_rows`` with ``HttpLookup`` per-key GETs on its defaults;
  (c) ``unordered_wait`` of one ``HttpLookup.lookup_many([key])`` per record.

Within a run the paths take turns (a, b, c, a, b, c, ...) and each keeps its best round.
``ENRICH_BENCH_HTTP=N`` sets the lookups per round, ``ENRICH_BENCH_HTTP_ROUNDS=N`` the
rounds of a run, ``ENRICH_BENCH_HTTP_RUNS=N`` the runs.
"""

from __future__ import annotations

import os
import random
import statistics
from typing import Any

from connectors.http import HttpLookup
from enrich.demo.local import dimension_service
from enrich.engine.caller.wait import DEFAULT_CAPACITY

from ._report import table, write
from .lookup import (
    HTTP_LOOKUPS,
    KEYS,
    SCHEMA,
    BareGet,
    per_record,
    rate_and_cpu,
    through_rows,
)

RUNS = int(os.environ.get("ENRICH_BENCH_HTTP_RUNS", 3))
# More rounds than the lookup suite's HTTP section: a best-of-5 per run is steadier on
# a shared machine, and each run is reported on its own.
ROUNDS = int(os.environ.get("ENRICH_BENCH_HTTP_ROUNDS", 5))
LATENCY = 0.005


def one_run(base: str, lookups: int = HTTP_LOOKUPS, rounds: int = ROUNDS) -> dict[str, float]:
    """One run's figures: each path's best lookups/s (``a``, ``b``, ``c``) and least
    client CPU s/lookup (``cpu_a``...), and the median over rounds of b/a and c/a taken
    within a round (``b/a round``, ``c/a round``: paths that ran seconds apart, so a
    burst of load elsewhere moves both sides of a ratio alike)."""
    capacity = DEFAULT_CAPACITY
    rng = random.Random(11)
    keys = [rng.randrange(KEYS) for _ in range(lookups)]
    per_key = HttpLookup(base + "/users/{}", schema=SCHEMA)
    bare = BareGet(base, capacity)
    paths = [
        bare.run,
        lambda k: through_rows(per_key, k),
        lambda k: per_record(per_key, k, capacity),
    ]
    for run in paths:  # warm up: connections, imports, the runtime loop
        run(keys[:300])
    rates: list[list[float]] = [[] for _ in paths]
    cpu: list[list[float]] = [[] for _ in paths]
    for _ in range(rounds):
        for n, run in enumerate(paths):
            rate, used = rate_and_cpu(run, keys)
            rates[n].append(rate)
            cpu[n].append(used)
    figures = {name: max(r) for name, r in zip("abc", rates, strict=True)}
    figures |= {f"cpu_{name}": min(c) for name, c in zip("abc", cpu, strict=True)}
    for name, n in (("b", 1), ("c", 2)):
        paired = [x / a for x, a in zip(rates[n], rates[0], strict=True)]
        figures[f"{name}/a round"] = statistics.median(paired)
    return figures


def main() -> None:
    rows: list[list[Any]] = []
    for number in range(1, RUNS + 1):
        with dimension_service(latency=LATENCY, users=KEYS) as base:
            f = one_run(base)
        load = os.getloadavg()[0]
        ratios = [f["b"] / f["a"], f["c"] / f["a"], f["b/a round"], f["c/a round"]]
        cpu = [f["cpu_a"] * 1e6, f["cpu_b"] * 1e6, f["cpu_c"] * 1e6]
        rows.append([number, f["a"], f["b"], f["c"], *ratios, *cpu, f"{load:.1f}"])
        print(f"run {number}: " + " ".join(f"{k} {v:.3f}" for k, v in f.items()), flush=True)
    headers = ["run", "(a) lookups/s", "(b) lookups/s", "(c) lookups/s", "b/a", "c/a"]
    headers += ["b/a within rounds", "c/a within rounds"]
    headers += ["(a) CPU us", "(b) CPU us", "(c) CPU us", "load (1 min)"]
    path = write(
        "http_per_key",
        "HTTP per-key GETs vs bare aiohttp",
        [
            (
                f"5 ms service, capacity {DEFAULT_CAPACITY}, {HTTP_LOOKUPS:,} lookups a round, "
                f"best of {ROUNDS} interleaved rounds, {RUNS} separate runs",
                table(headers, rows),
            )
        ],
        notes=(
            "(a) bare aiohttp, semaphore(100), one GET per key; (b) `lookup_rows`, "
            "`HttpLookup` per-key GET, defaults; (c) `unordered_wait`, one `HttpLookup` "
            "call per record. CPU: this process's CPU per lookup (all threads; the service "
            "runs in a process of its own), least of the rounds. b/a and c/a: of the best "
            "rounds; within rounds: the median over rounds of the ratio in one round.\n\n"
            "Rerun: `./scripts/dev bench http_per_key` ("
            "ENRICH_BENCH_HTTP=N lookups a round, "
            "ENRICH_BENCH_HTTP_RUNS=N runs, ENRICH_BENCH_HTTP_ROUNDS=N rounds a run)."
        ),
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
