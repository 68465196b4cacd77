"""The async wait operator against a plain loop, and against Little's law.

1. An instantly-completing function through ``ordered_wait`` vs a plain Python loop
   running the same coroutines to completion.
2. A function sleeping L with capacity C: throughput as a fraction of the bound C/L.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import enrich

from ._report import best_rate, table, write

N_INSTANT = 300_000


async def double(value: int) -> list[int]:
    return [value * 2]


class CallbackDouble(enrich.AsyncFunction):
    def async_invoke(self, value: int, result: enrich.ResultFuture) -> None:
        result.complete([value * 2])


def plain_loop() -> int:
    """The same coroutines run to completion one after the other, outputs collected."""
    outputs: list[int] = []
    for value in range(N_INSTANT):
        coro = double(value)
        try:
            coro.send(None)
        except StopIteration as stop:
            outputs.extend(stop.value)
    return len(outputs)


def through(wait: Any, func: Any, capacity: int = 1000) -> int:
    return len(list(wait(range(N_INSTANT), func, capacity=capacity)))


def instant_section(rounds: int = 5) -> str:
    """Best rate of each path over ``rounds`` rounds that run every path in turn: on a
    shared machine a burst of load then hits all paths alike, not one of them."""
    paths: list[tuple[str, Any]] = [
        ("plain loop, coroutine.send()", plain_loop),
        ("ordered_wait, async def", lambda: through(enrich.ordered_wait, double)),
        ("unordered_wait, async def", lambda: through(enrich.unordered_wait, double)),
        ("ordered_wait, callback style", lambda: through(enrich.ordered_wait, CallbackDouble())),
    ]
    best = dict.fromkeys((label for label, _ in paths), 0.0)
    for _ in range(rounds):
        for label, run in paths:
            best[label] = max(best[label], best_rate(run, repeat=1))
    plain = best[paths[0][0]]
    rows = [[label, rate, rate / plain] for label, rate in best.items()]
    return table(["path (capacity 1000)", "records/s", "ratio to plain loop"], rows)


class Sleeper:
    """``await asyncio.sleep(latency)`` per record, timing how long each call really took
    (the loop's timers are coarser than a millisecond)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.total = 0.0
        self.calls = 0

    async def __call__(self, value: int) -> list[int]:
        started = time.perf_counter()
        await asyncio.sleep(self.latency)
        self.total += time.perf_counter() - started
        self.calls += 1
        return [value]


def littles_law_section() -> str:
    rows = []
    for latency_ms in (1, 5, 20):
        for capacity in (10, 100, 1000):
            latency = latency_ms / 1000
            bound = capacity / latency
            count = int(min(max(bound * 1.0, 300), 60_000))
            best = (0.0, 0.0)
            for _ in range(2):
                func = Sleeper(latency)
                started = time.perf_counter()
                done = sum(
                    1
                    for _ in enrich.unordered_wait(
                        range(count), func, capacity=capacity, timeout=None
                    )
                )
                rate = done / (time.perf_counter() - started)
                if rate > best[0]:
                    best = (rate, func.total / func.calls)
            rate, real = best
            effective = capacity / real
            rows.append(
                [latency_ms, capacity, bound, real * 1000, rate, rate / bound, rate / effective]
            )
    return table(
        [
            "L (ms)",
            "C",
            "bound C/L",
            "real call time (ms)",
            "records/s",
            "of C/L",
            "of C/real time",
        ],
        rows,
    )


def bare_asyncio_rate(latency: float, capacity: int, count: int) -> tuple[float, float]:
    """Reference: asyncio tasks under a semaphore on a loop of the runtime's kind, no
    engine and no thread hand-over. Returns (records/s, mean real call time)."""
    from enrich.engine.runtime import _new_loop

    func = Sleeper(latency)

    async def run() -> float:
        gate = asyncio.Semaphore(capacity)
        outputs: list[int] = []
        tasks: set[asyncio.Task[None]] = set()  # held until done, as asyncio asks

        async def one(value: int) -> None:
            try:
                outputs.extend(await func(value))
            finally:
                gate.release()

        started = time.perf_counter()
        for value in range(count):
            await gate.acquire()
            task = asyncio.ensure_future(one(value))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        for _ in range(capacity):
            await gate.acquire()
        return len(outputs) / (time.perf_counter() - started)

    loop = _new_loop()
    try:
        rate = loop.run_until_complete(run())
    finally:
        loop.close()
    return rate, func.total / func.calls


def reference_section() -> str:
    """The engine next to bare asyncio at 5 ms and capacity 100, alternating runs."""
    latency, capacity, count = 0.005, 100, 20_000
    bound = capacity / latency
    best = {"engine": (0.0, 0.0), "bare": (0.0, 0.0)}
    for _ in range(3):
        func = Sleeper(latency)
        started = time.perf_counter()
        done = sum(1 for _ in enrich.unordered_wait(range(count), func, capacity=capacity))
        rate = done / (time.perf_counter() - started)
        if rate > best["engine"][0]:
            best["engine"] = (rate, func.total / func.calls)
        bare = bare_asyncio_rate(latency, capacity, count)
        if bare[0] > best["bare"][0]:
            best["bare"] = bare
    rows = []
    for label, key in (("unordered_wait (sync iterator)", "engine"), ("bare asyncio", "bare")):
        rate, real = best[key]
        rows.append([label, rate, real * 1000, rate / bound, rate / (capacity / real)])
    rows.append(["engine / bare asyncio", best["engine"][0] / best["bare"][0], "", "", ""])
    return table(
        ["L 5 ms, C 100", "records/s", "real call time (ms)", "of C/L", "of C/real time"], rows
    )


def main() -> None:
    loop_kind = "asyncio" if os.environ.get("ENRICH_LOOP") == "asyncio" else "uvloop if installed"
    path = write(
        "operator",
        "Async wait operator",
        [
            ("Instantly-completing function vs a plain loop", instant_section()),
            (
                "Latent function vs Little's law (unordered_wait)",
                littles_law_section()
                + "\n\n`of C/real time` divides by the bound computed from the time each call "
                "really took (asyncio's timers overshoot short sleeps); rows far below 1 "
                "there are CPU-bound: C/L above what one core runs per second.",
            ),
            ("The engine next to bare asyncio (a semaphore and tasks)", reference_section()),
        ],
        notes=(
            f"Runtime loop: {loop_kind}. Python {sys.version.split()[0]}. "
            "Rerun: `./scripts/dev bench operator`."
        ),
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
