"""``async_map``'s worker side against the hand-written ``gather``, without Spark: the
client CPU a row costs (issue 43), which decides both rates at 5 ms a call on a small
machine (both are bound by the client's CPU, not by waiting).

One process drives Arrow batches of 10,000 rows (Spark's default) through
``enrich.spark.async_maps.map_batches.map_batches`` (``async_map``'s ``mapInArrow`` body, its
runtime loop on a thread of its own) with ``benchmarks.async_map_paths.PostRow`` (one
aiohttp POST a row to ``benchmarks.score_service``, 5 ms), and through the hand-written
body of ``gather_per_batch`` (per batch, ``asyncio.gather`` under a semaphore of 100 on
the caller's loop), taking turns. Reported: rows/s and the client process's CPU
microseconds a row (``time.process_time``, every thread: the figure load moves least).
``eager``: the engine with every record started eagerly (asyncio's Python task for a
record that waits, as before issue 43); ``engine``: as shipped.

``ENRICH_BENCH_CPU_ROWS`` (20,000), ``ENRICH_BENCH_CPU_ROUNDS`` (3), ``..._TAIL=1``: 1%
of calls at 500 ms. Run: ``python -m benchmarks.async_map_cpu``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pyarrow as pa

ROWS = int(os.environ.get("ENRICH_BENCH_CPU_ROWS", 20_000))
ROUNDS = int(os.environ.get("ENRICH_BENCH_CPU_ROUNDS", 3))
TAIL = os.environ.get("ENRICH_BENCH_CPU_TAIL") == "1"
BATCH = 10_000
CAPACITY = 100


def batches(rows: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, rows, BATCH):
        ids = list(range(start, min(rows, start + BATCH)))
        yield pa.RecordBatch.from_pydict(
            {"id": ids, "user_id": [i * 7919 % 100_000 for i in ids], "amount": [1.5] * len(ids)}
        )


def engine(base: str, mode: str, key: str) -> int:
    from enrich.maps.map_settings import MapSettings
    from enrich.spark.async_maps.map_batches import MapPlan, map_batches

    from .async_map_paths import RETURNS, PostRow

    settings = MapSettings(returns=RETURNS, capacity=CAPACITY, mode=mode)
    plan = MapPlan(name=key, key=key, fn=PostRow(base), columns=("score", "label"),
                   settings=settings)  # fmt: skip
    return sum(b.num_rows for b in map_batches(plan, batches(ROWS)))


def hand(base: str) -> int:
    """``gather_per_batch``'s body on Arrow batches (``to_pylist`` in, arrays out)."""
    loop = asyncio.new_event_loop()
    session = loop.run_until_complete(_session())
    slots = asyncio.Semaphore(CAPACITY)
    url = f"{base}/score"

    async def one(row: dict[str, Any]) -> Any:
        async with slots, session.post(url, json=row) as response:
            response.raise_for_status()
            return await response.json()

    async def batch(rows: list[dict[str, Any]]) -> list[Any]:
        return await asyncio.gather(*(one(row) for row in rows))

    n = 0
    try:
        for b in batches(ROWS):
            results = loop.run_until_complete(batch(b.to_pylist()))
            out = pa.RecordBatch.from_arrays(
                [*b.columns, pa.array([r["score"] for r in results]),
                 pa.array([r["label"] for r in results])],
                names=[*b.schema.names, "score", "label"],
            )  # fmt: skip
            n += out.num_rows
    finally:
        loop.run_until_complete(session.close())
        loop.close()
    return n


async def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession()


def main() -> None:
    from enrich.engine.mailbox import eager

    from .async_map import FAST, SLOW, SLOW_EVERY
    from .score_service import score_service

    tail = {"slow_every": SLOW_EVERY, "slow_latency": SLOW} if TAIL else {}
    mode = "unordered" if TAIL else "ordered"
    sample = getattr(eager, "SAMPLE", None)
    results: dict[str, list[tuple[float, float]]] = {}
    with score_service(FAST, **tail) as service:
        engine(service.base, mode, "warm")  # the runtime loop and the session, untimed
        for n in range(ROUNDS):
            for label in ("engine", "eager", "hand"):
                if sample is not None:
                    eager.SAMPLE = 10**12 if label == "eager" else sample
                wall, cpu = time.perf_counter(), time.process_time()
                rows = hand(service.base) if label == "hand" else engine(
                    service.base, mode, f"{label}{n}")  # fmt: skip
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                results.setdefault(label, []).append((rows / wall, cpu / rows * 1e6))
                print(f"  round {n + 1}, {label}: {rows / wall:,.0f} rows/s, "
                      f"{cpu / rows * 1e6:.0f} us CPU a row, load {os.getloadavg()[0]:.1f}",
                      flush=True)  # fmt: skip
    if sample is not None:
        eager.SAMPLE = sample
    print(f"{'tail 1% at 500 ms, unordered' if TAIL else '5 ms, ordered'}; medians of {ROUNDS}")
    for label, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        ratio = statistics.median(a[0] / b[0] for a, b in zip(runs, results["hand"], strict=True))
        print(f"  {label}: {rate:,.0f} rows/s, {cpu:.0f} us CPU a row, {ratio:.2f}x hand (rate)")


if __name__ == "__main__":
    main()
