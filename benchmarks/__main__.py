"""Run benchmarks: ``python -m benchmarks [SUITE ...]`` with suites from :data:`SUITES`
(default: operator)."""

from __future__ import annotations

import importlib
import sys

SUITES = (
    "operator",
    "lookup",
    "tail",
    "http_per_key",
    "spark",
    "cache",
    "rss",
    "pipeline",
    "latency",
    "microbatch",
    "stream_source",
    "sink",
    "sink_commit",
    "affinity",
    "sql_join",
    "full_cache",
    "spark_versions",
    "limits",
    "knee_model",
    "async_map",
    "postgres",
    "mysql",
    "kafka",
    "kafka_sink",
)


def main(argv: list[str]) -> None:
    names = argv or ["operator"]
    for name in names:
        if name not in SUITES:
            raise SystemExit(f"unknown benchmark {name!r}; choose from {', '.join(SUITES)}")
    for name in names:
        importlib.import_module(f"benchmarks.{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
