"""The rounds of ``benchmarks/async_map.py``: contenders taking turns, their rates per
round, and the table rows made of them (best round, median round, a ratio of the best
rounds and the median of the ratios within rounds)."""

from __future__ import annotations

import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from .score_service import Service

TASKS = 2

HEADERS = [
    "contender",
    "rows/s (best round)",
    "median round",
    "ratio of the best rounds",
    "ratio within rounds (median)",
    "calls p50 / p99, peak in flight",
    "service cores",
]

# label -> (DataFrame, rows, Spark SQL settings for its runs)
Contenders = dict[str, tuple[Any, int, dict[str, str]]]


@dataclass
class Runs:
    """Each contender's rows/s and the service's cores (of the machine's), per round."""

    rates: dict[str, list[float]] = field(default_factory=dict)
    cores: dict[str, list[float]] = field(default_factory=dict)

    def best(self, label: str) -> float:
        return max(self.rates[label])

    def median(self, label: str) -> float:
        return statistics.median(self.rates[label])

    def cores_at_best(self, label: str) -> float:
        rates = self.rates[label]
        return self.cores[label][rates.index(max(rates))]

    def within(self, label: str, other: str) -> float:
        """The median over rounds of ``label``'s rate over ``other``'s in that round."""
        pairs = zip(self.rates[label], self.rates[other], strict=True)
        return statistics.median(a / b for a, b in pairs)

    def add_best_of(self, label: str, labels: list[str]) -> None:
        """A contender made of the best of ``labels`` in each round."""
        rounds = zip(*(self.rates[name] for name in labels), strict=True)
        self.rates[label] = [max(rates) for rates in rounds]
        self.cores[label] = [float("nan")] * len(self.rates[label])  # not one run

    def row(
        self, what: str, label: str, ratio: tuple[str, str] | None = None, calls: str = ""
    ) -> list[Any]:
        """A table row: ``label``'s figures, and ``ratio`` (a, b): a's rate over b's."""
        ratios: list[Any] = ["", ""]
        if ratio is not None:
            ratios = [self.best(ratio[0]) / self.best(ratio[1]), self.within(*ratio)]
        cores = self.cores_at_best(label)
        return [
            what,
            self.best(label),
            self.median(label),
            *ratios,
            calls,
            "" if cores != cores else cores,
        ]


def scored_input(spark: Any, rows: int) -> Any:
    """``rows`` rows (``id``, ``user_id``, ``amount``: functions of ``id``), 2 partitions,
    cached (not part of a timing)."""
    from pyspark.sql import functions as F

    df = spark.range(rows, numPartitions=TASKS).select(
        F.col("id"),
        ((F.col("id") * 7919) % 100_000).alias("user_id"),
        F.round((F.col("id") % 1000) * 0.37, 2).alias("amount"),
    )
    df = df.cache()
    df.count()
    return df


def rounds(spark: Any, service: Service, contenders: Contenders, count: int) -> Runs:
    """Every contender once per round, to the noop sink (its settings set meanwhile)."""
    runs = Runs({label: [] for label in contenders}, {label: [] for label in contenders})
    for n in range(count):
        for label, (frame, rows, settings) in contenders.items():
            for key, value in settings.items():
                spark.conf.set(key, value)
            cpu = service.cpu_seconds()
            started = time.perf_counter()
            try:
                frame.write.format("noop").mode("overwrite").save()
            finally:
                for key in settings:
                    spark.conf.unset(key)
            elapsed = time.perf_counter() - started
            rate, cores = rows / elapsed, (service.cpu_seconds() - cpu) / elapsed
            print(f"  round {n + 1}, {label}: {rate:,.0f} rows/s, service {cores:.2f} cores")
            runs.rates[label].append(rate)
            runs.cores[label].append(cores)
    return runs


def verdict(what: str, runs: Runs, ours: str, other: str, target: float) -> list[Any]:
    """A target's row, judged on the ratio within rounds."""
    within = runs.within(ours, other)
    met = "met" if within >= target else "MISSED"
    return [what, "", "", runs.best(ours) / runs.best(other), f"{within:.2f}: {met}", "", ""]


def calls(name: str) -> str:
    """The map's call latency p50 / p99 and its peak rows in flight (all rounds)."""
    from enrich.spark import statistics as map_statistics

    s = map_statistics(name)
    p50, p99 = (s.latency_p50 or 0.0) * 1000, (s.latency_p99 or 0.0) * 1000
    return f"{p50:.1f} / {p99:.0f} ms, peak {s.peak_in_flight}"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
