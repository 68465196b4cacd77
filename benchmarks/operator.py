"""The async wait operator against a plain loop, and against Little's law.

1. An instantly-completing function through ``ordered_wait`` vs a plain Python loop
   running the same coroutines to completion.
2. A function sleeping L with capacity C: throughput as a fraction of the bound C/L.
"""

from __future__ import annotations

import asyncio
import os
import sys
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
    count = 0
    for value in range(N_INSTANT):
        coro = double(value)
        try:
            coro.send(None)
        except StopIteration as stop:
            count += len(stop.value)
    return count


def through(wait: Any, func: Any, capacity: int = 1000) -> int:
    return sum(1 for _ in wait(range(N_INSTANT), func, capacity=capacity))


def instant_section() -> str:
    plain = best_rate(plain_loop)
    rows: list[list[Any]] = [["plain loop, coroutine.send()", plain, 1.0]]
    for label, run in (
        ("ordered_wait, async def", lambda: through(enrich.ordered_wait, double)),
        ("unordered_wait, async def", lambda: through(enrich.unordered_wait, double)),
        ("ordered_wait, callback style", lambda: through(enrich.ordered_wait, CallbackDouble())),
    ):
        rate = best_rate(run)
        rows.append([label, rate, rate / plain])
    return table(["path (capacity 1000)", "records/s", "ratio to plain loop"], rows)


def sleeper(latency: float) -> Any:
    async def sleep(value: int) -> list[int]:
        await asyncio.sleep(latency)
        return [value]

    return sleep


def littles_law_section() -> str:
    rows = []
    for latency_ms in (1, 5, 20):
        for capacity in (10, 100, 1000):
            latency = latency_ms / 1000
            bound = capacity / latency
            count = int(min(max(bound * 1.0, 300), 60_000))
            func = sleeper(latency)
            rate = best_rate(
                lambda c=count, f=func, cap=capacity: sum(
                    1 for _ in enrich.unordered_wait(range(c), f, capacity=cap, timeout=None)
                ),
                repeat=2,
            )
            rows.append([latency_ms, capacity, bound, rate, rate / bound])
    return table(
        ["latency L (ms)", "capacity C", "bound C/L (records/s)", "measured", "fraction of bound"],
        rows,
    )


def main() -> None:
    loop_kind = "asyncio" if os.environ.get("ENRICH_LOOP") == "asyncio" else "uvloop if installed"
    path = write(
        "operator",
        "Async wait operator",
        [
            ("Instantly-completing function vs a plain loop", instant_section()),
            ("Latent function vs Little's law (unordered_wait)", littles_law_section()),
        ],
        notes=(
            f"Runtime loop: {loop_kind}. Python {sys.version.split()[0]}. "
            "Rerun: `./scripts/dev bench operator`."
        ),
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
