"""Markdown tables for benchmark results, printed and written under benchmarks/results/."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def best_rate(run: Callable[[], int], repeat: int = 3) -> float:
    """Items per second of the best of ``repeat`` runs (the machine is shared and noisy)."""
    best = 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        count = run()
        elapsed = time.perf_counter() - start
        best = max(best, count / elapsed)
    return best


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write(name: str, title: str, sections: Sequence[tuple[str, str]], notes: str = "") -> Path:
    RESULTS.mkdir(exist_ok=True)
    header = (
        f"# {title}\n\n"
        f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC on "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs. Ratios compare runs made side by side in one process; "
        f"absolute rates vary with the (shared) machine.\n"
    )
    body = "\n".join(f"\n## {heading}\n\n{content}\n" for heading, content in sections)
    text = header + body + (f"\n{notes}\n" if notes else "")
    path = RESULTS / f"{name}.md"
    path.write_text(text)
    print(text)
    return path
