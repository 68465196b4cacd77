"""spark-submit entry point: read a source, apply the configured lookup joins, write.

    spark-submit jobs/enrich_job.py --config job.yaml [--duration 60]

The same job runs with ``enrich run job.yaml``. The config (YAML, JSON or TOML) is
described in ``jobs/_config.py``; ``examples/`` has configs that run as they are. A
streaming job runs until its input is drained (files: ``availableNow``), until
``--duration`` seconds have passed, or until it is stopped: SIGTERM or SIGINT (Ctrl-C)
stop it once its micro-batch in progress has committed (:mod:`jobs._stop`). One metrics line
per join and micro-batch is logged, and a summary per join at the end.

It ends in one line: when the query fails, the root cause (the library's error, with
its store, key and reason) is the last line, after the name of the log file that holds
the whole trace (exit code 1), whenever the query failed: at its start, in a micro-batch,
in the one still running when ``--duration`` ran out, or as it stopped. A run in which
rows failed their lookups ends with a warning counting them by reason; past the config's
``max_error_ratio`` it exits with 3. Exit code 0 only when the query stopped without error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs import _config, _entry, _lookups, _streams
from jobs._files import ConfigError


def enrich(spark: Any, config: _config.JobConfig, df: Any) -> tuple[Any, list[str]]:
    """``df`` through the configured steps (lookup joins and async functions), in order;
    returns it and the steps' names.

    Steps whose ``on_error`` is ``dead_letter`` keep their failures in a private error
    column each; they are folded into ``enrich_error`` (``"<step>: <reason>"``, the first
    failing step's) for the dead-letter split.
    """
    from pyspark.sql.functions import coalesce, col, concat, lit, when

    from enrich.spark import async_map, lookup_join

    names: list[str] = []
    reasons = []
    for i, join in enumerate(config.joins):
        settings = dict(join)
        settings.setdefault("name", step_name(join, i))
        names.append(settings["name"])
        if settings.get("on_error") == _lookups.DEAD_LETTER:
            column = f"_enrich_error_{i}"
            settings.update(on_error="error_column", error_column=column)
            reasons.append(
                when(col(column).isNotNull(), concat(lit(f"{settings['name']}: "), col(column)))
            )
        try:
            settings = _lookups.with_operator_settings(settings)
            if "fn" in settings:
                settings.pop("check_row", None)
                df = async_map(df, settings.pop("fn"), settings.pop("returns"), **settings)
            else:
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
        _entry.summary(names, _policies(names, config.joins))
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
    _entry.summary(names, _policies(names, config.joins))
    return query


def step_name(step: dict[str, Any], index: int) -> str:
    """A step's metrics name: its own, else ``join_<i>`` (``map_<i>`` for a function)."""
    return str(step.get("name") or (f"map_{index}" if "fn" in step else f"join_{index}"))


def _policies(names: list[str], joins: list[dict[str, Any]]) -> dict[str, str]:
    return {
        name: str(join.get("on_error", "fail")) for name, join in zip(names, joins, strict=True)
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _entry.arguments((__doc__ or "").splitlines()[0]).parse_args(argv)

    def prepare(config: _config.JobConfig) -> tuple[_entry.Body, list[str]]:
        names = [step_name(join, i) for i, join in enumerate(config.joins)]
        return lambda spark: run(spark, config, args.duration), names

    return _entry.main(args, prepare)


if __name__ == "__main__":
    raise SystemExit(main())
