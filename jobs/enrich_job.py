"""spark-submit entry point: read a source, apply the configured lookup joins, write.

    spark-submit jobs/enrich_job.py --config job.yaml [--duration 60]

The same job runs with ``enrich run job.yaml``. The config (YAML, JSON or TOML) is
described in ``jobs/_config.py``; ``examples/`` has configs that run as they are. A
streaming job runs until its input is drained (files: ``availableNow``), until
``--duration`` seconds have passed, or until it is stopped (Ctrl-C). One metrics line
per join and micro-batch is logged, and a summary per join at the end.

It ends in one line: when the query fails, the root cause (the library's error, with
its store, key and reason) is the last line, after the name of the log file that holds
the whole trace (exit code 1). A run in which rows failed their lookups ends with a
warning counting them by reason; past the config's ``max_error_ratio`` it exits with 3.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from jobs import _config, _outcome, _streams
from jobs._files import ConfigError

log = logging.getLogger("enrich.jobs")


def enrich(spark: Any, config: _config.JobConfig, df: Any) -> tuple[Any, list[str]]:
    """``df`` through the configured joins, in order; returns it and the joins' names.

    Joins whose ``on_error`` is ``dead_letter`` keep their failures in a private error
    column each; they are folded into ``enrich_error`` (``"<join>: <reason>"``, the first
    failing join's) for the dead-letter split.
    """
    from pyspark.sql.functions import coalesce, col, concat, lit, when

    from enrich.spark import lookup_join

    names: list[str] = []
    reasons = []
    for i, join in enumerate(config.joins):
        settings = dict(join)
        settings.setdefault("name", f"join_{i}")
        names.append(settings["name"])
        if settings.get("on_error") == _config.DEAD_LETTER:
            column = f"_enrich_error_{i}"
            settings.update(on_error="error_column", error_column=column)
            reasons.append(
                when(col(column).isNotNull(), concat(lit(f"{settings['name']}: "), col(column)))
            )
        try:
            df = lookup_join(df, settings.pop("source"), **settings)
        except ValueError as exc:  # a key column missing or of the wrong type, a clash
            raise ConfigError(f"joins[{i}]: {exc}") from None
    if config.dead_letter is not None:
        private = [f"_enrich_error_{i}" for i in range(len(config.joins))]
        reason = coalesce(*reasons) if reasons else lit(None).cast("string")
        df = df.withColumn(_streams.ERROR_COLUMN, reason)
        df = df.drop(*[c for c in private if c in df.columns])
    return df, names


def run(spark: Any, config: _config.JobConfig, duration: float | None = None) -> Any:
    """Run the job: a streaming query (returned once finished or stopped) or a batch.

    Ends with a summary line per join (after the last micro-batch's line) and, when
    rows failed their lookups, a warning counting them by join and reason.

    Args:
        duration: stop a streaming query after this many seconds, once the micro-batch
            then in progress has committed (None: run until its input is drained, or
            forever for an endless source).
    """
    from enrich.spark import EnrichMetricsListener

    if config.source is None:
        raise ConfigError("the config needs a 'source' section to run a job")
    _streams.register_data_sources(spark)
    df, names = enrich(spark, config, _streams.read(spark, config.source))
    if not df.isStreaming:
        _streams.write_all(df, config)
        summary(names, _policies(names, config.joins))
        return None
    listener = EnrichMetricsListener()
    spark.streams.addListener(listener)
    query = _streams.start(df, config)
    try:
        _streams.await_query(query, duration)
    finally:
        # The listener hears of the last micro-batch a moment after the query ends:
        # the summary waits for that line, so that it comes last.
        last = query.lastProgress
        if last is not None:
            listener.wait_for(str(query.id), int(last["batchId"]), timeout=10.0)
        spark.streams.removeListener(listener)
    summary(names, _policies(names, config.joins))
    return query


def totals(names: list[str]) -> dict[str, Any]:
    """Each join's cumulative metrics (joins without metrics left out)."""
    from enrich.spark import statistics

    out = {}
    for name in names:
        try:
            out[name] = statistics(name)
        except LookupError:  # Spark Connect: no accumulators, no metrics
            continue
    return out


def _policies(names: list[str], joins: list[dict[str, Any]]) -> dict[str, str]:
    return {
        name: str(join.get("on_error", "fail")) for name, join in zip(names, joins, strict=True)
    }


def summary(names: list[str], policies: dict[str, str]) -> None:
    """A line per join, then a warning if rows failed their lookups (each join's
    ``on_error`` named as the config wrote it: ``policies``)."""
    numbers = totals(names)
    for name in names:
        if name in numbers:
            log.info("%s: %s", name, numbers[name].summary())
        else:
            log.info("%s: no metrics (Spark Connect has no accumulators)", name)
    failed = _outcome.failed_rows(numbers, policies)
    if failed is not None:
        log.warning("%s", failed)


def quiet_logging() -> None:
    """Our lines at INFO, everyone else's (py4j's chatter included) at WARNING."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("enrich").setLevel(logging.INFO)


def arguments(description: str, sql: bool = False) -> argparse.ArgumentParser:
    """The options both spark-submit jobs take."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", required=True, help="a YAML, JSON or TOML job config")
    if sql:
        parser.add_argument("--sql", required=True, help="the SQL file to run")
    parser.add_argument(
        "--duration", type=float, default=None, help="stop a streaming job after SECONDS"
    )
    parser.add_argument(
        "--log-file",
        default=None,
        metavar="PATH",
        help="where a failure's whole trace goes (default: a new file in the temporary "
        "folder, named when used)",
    )
    parser.add_argument(
        "--spark-output-to-log",
        action="store_true",
        help="send the JVM's own standard error (Spark's log lines, task traces) to the "
        "log file too (what `enrich run` does; not possible under spark-submit, where the "
        "JVM is already running)",
    )
    return parser


def start_spark(config: _config.JobConfig, log_file: Any, own_output: bool) -> Any:
    """A session logging at WARN from its start (``spark.log.level``: under spark-submit
    the JVM logs some hundred INFO lines otherwise), its JVM's standard error sent to
    ``log_file`` if asked."""
    from enrich.spark import session

    if own_output:
        log.info("Spark's own output goes to %s", log_file)
    with _outcome.stderr_to(log_file) if own_output else contextlib.nullcontext():
        return session(
            config.name, spark__ui__showConsoleProgress="false", spark__log__level="WARN"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments((__doc__ or "").splitlines()[0]).parse_args(argv)
    quiet_logging()
    try:
        config = _config.load(args.config)
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
    names: list[str] = []
    try:
        names = [join.get("name", f"join_{i}") for i, join in enumerate(config.joins)]
        run(spark, config, args.duration)
    except ConfigError as exc:
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
