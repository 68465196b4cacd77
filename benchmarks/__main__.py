"""Run benchmarks: ``python -m benchmarks [SUITE ...]`` with suites from :data:`SUITES`
(default: operator). Options after one suite's name go to that suite's ``main(argv)``
(those in :data:`TAKES_OPTIONS`): ``python -m benchmarks kafka --rates 2000,10000``."""

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
    "realtime",
    "warm_start",
    "worker_path",
    "task_timeline",
)


# Suites whose main() takes its own command-line options.
TAKES_OPTIONS = ("kafka", "realtime")


def main(argv: list[str]) -> None:
    first = next((i for i, arg in enumerate(argv) if arg.startswith("-")), len(argv))
    names, options = argv[:first] or ["operator"], argv[first:]
    if options:
        if len(names) != 1 or names[0] not in TAKES_OPTIONS:
            raise SystemExit(
                f"options ({' '.join(options)}) go after one suite that takes them: "
                f"{', '.join(TAKES_OPTIONS)}"
            )
        importlib.import_module(f"benchmarks.{names[0]}").main(options)
        return
    for name in names:
        if name not in SUITES:
            raise SystemExit(f"unknown benchmark {name!r}; choose from {', '.join(SUITES)}")
    for name in names:
        importlib.import_module(f"benchmarks.{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
