"""spark-submit entry point: register lookup functions, then run a SQL file.

    spark-submit jobs/sql_job.py --config lookups.json --sql enrich.spark.sql

The config's ``lookups`` become SQL functions (``register_lookup``); its ``input`` (if
any) is registered as the view ``input``. Statements are separated by ``;``. The last
statement's result is written as the config's ``output`` says, or shown.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs import _config
from jobs.enrich_job import read, write


def statements(text: str) -> list[str]:
    """The statements of a SQL file: split on ``;``, comments and blanks dropped."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def run(spark: Any, config: _config.JobConfig, sql: str) -> Any:
    from enrich.spark.sql import register_lookup

    for name, settings in config.lookups.items():
        options = dict(settings)
        register_lookup(spark, name, options.pop("source"), **options)
    if config.input:
        read(spark, config.input).createOrReplaceTempView("input")
    result = None
    for statement in statements(sql):
        result = spark.sql(statement)
    if result is not None and config.output:
        return write(result, config.output)
    if result is not None and not result.isStreaming:
        result.show(truncate=False)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="a JSON (or TOML) config")
    parser.add_argument("--sql", required=True, help="the SQL file to run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    config = _config.load(args.config)
    from enrich.spark import session

    run(session("enrich-sql"), config, Path(args.sql).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
