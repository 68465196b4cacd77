"""spark-submit entry point: register lookup functions, then run a SQL file.

    spark-submit jobs/sql_job.py --config job.yaml --sql enrich.sql

The same runs with ``enrich run job.yaml --sql enrich.sql``. The config's ``lookups``
become SQL functions (``register_lookup``); its ``source`` (if any) is registered as the
view ``input``; its ``lookup_joins`` become table functions joining a view's rows
(``register_lookup_join``: ``SELECT * FROM users_join(TABLE(input))``), for the view
named by their ``input`` (default ``input``). Statements are separated by ``;``. The
last statement's result is written as the config's ``sink`` says (streaming or not), or
shown.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs import _config, _outcome, _streams
from jobs._files import ConfigError
from jobs.enrich_job import arguments, log, quiet_logging, start_spark, summary, totals


def statements(text: str) -> list[str]:
    """The statements of a SQL file: split on ``;``, comments and blanks dropped."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def run(spark: Any, config: _config.JobConfig, sql: str, duration: float | None = None) -> Any:
    """Register the lookups, run the statements, write (or show) the last result."""
    from enrich.spark.sql import register_lookup

    _streams.register_data_sources(spark)
    for name, settings in config.lookups.items():
        options = dict(settings)
        register_lookup(spark, name, options.pop("source"), **options)
    if config.source is not None:
        _streams.read(spark, config.source).createOrReplaceTempView("input")
    if config.lookup_joins:
        from enrich.spark.sql_join import register_lookup_join

        for name, settings in config.lookup_joins.items():
            options = dict(settings)
            source, view = options.pop("source"), options.pop("input", "input")
            register_lookup_join(spark, name, source, input=view, **options)
    result = None
    for statement in statements(sql):
        result = spark.sql(statement)
    if result is None:
        return None
    if result.isStreaming:
        query = _streams.start(result, config)
        _streams.await_query(query, duration)
        return query
    if config.sink is not None:
        _streams.write_all(result, config)
    else:
        result.show(truncate=False)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments((__doc__ or "").splitlines()[0], sql=True).parse_args(argv)
    quiet_logging()
    try:
        config = _config.load(args.config)
        sql = Path(args.sql).read_text()
    except OSError as exc:
        print(f"error: cannot read the SQL file {args.sql!r}: {exc.strerror}", file=sys.stderr)
        return _outcome.EXIT_BAD_CONFIG
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _outcome.EXIT_BAD_CONFIG
    for warning in config.warnings:
        log.warning("%s", warning)
    log_file = _outcome.log_path(config.name, args.log_file)
    try:
        spark = start_spark(config, log_file, args.spark_output_to_log)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _outcome.EXIT_BAD_CONFIG
    failure: BaseException | None = None
    names = list(config.lookups)  # each function's metrics are filed under its name
    try:
        run(spark, config, sql, args.duration)
        summary(names, {n: str(s.get("on_error", "fail")) for n, s in config.lookups.items()})
    except ConfigError as exc:  # found as the query starts (a memory sink with a dead letter)
        print(f"error: {exc}", file=sys.stderr)
        return _outcome.EXIT_BAD_CONFIG
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    except Exception as exc:  # the query failed: one line here, the trace in the log
        failure = exc
    finally:
        spark.stop()  # drains the listener bus while this process can still answer it
    if failure is not None:
        return _outcome.report(failure, log_file)
    too_many = _outcome.over_ratio(totals(names), config.max_error_ratio)
    if too_many is not None:
        print(f"error: {too_many}", file=sys.stderr)
        return _outcome.EXIT_TOO_MANY_ERRORS
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
