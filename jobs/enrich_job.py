"""spark-submit entry point: read a source, apply the configured lookup joins, write.

    spark-submit jobs/enrich_job.py --config job.yaml [--duration 60]

The same job runs with ``enrich run job.yaml``. The config (YAML, JSON or TOML) is
described in ``jobs/_config.py``; ``examples/`` has configs that run as they are. A
streaming job runs until its input is drained (files: ``availableNow``), until
``--duration`` seconds have passed, or until it is stopped (Ctrl-C). One metrics line
per join and micro-batch is logged, and a summary per join at the end.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from jobs import _config, _streams
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
        df = lookup_join(df, settings.pop("source"), **settings)
    if config.dead_letter is not None:
        private = [f"_enrich_error_{i}" for i in range(len(config.joins))]
        reason = coalesce(*reasons) if reasons else lit(None).cast("string")
        df = df.withColumn(_streams.ERROR_COLUMN, reason)
        df = df.drop(*[c for c in private if c in df.columns])
    return df, names


def run(spark: Any, config: _config.JobConfig, duration: float | None = None) -> Any:
    """Run the job: a streaming query (returned once finished or stopped) or a batch.

    Args:
        duration: stop a streaming query after this many seconds, once the micro-batch
            then in progress has committed (None: run until its input is drained, or
            forever for an endless source).
    """
    from enrich.spark import EnrichMetricsListener, statistics

    if config.source is None:
        raise ConfigError("the config needs a 'source' section to run a job")
    _streams.register_data_sources(spark)
    df, names = enrich(spark, config, _streams.read(spark, config.source))
    if not df.isStreaming:
        _streams.write_all(df, config)
        _summary(names, statistics)
        return None
    listener = EnrichMetricsListener()
    spark.streams.addListener(listener)
    query = _streams.start(df, config)
    try:
        _streams.await_query(query, duration)
    finally:
        spark.streams.removeListener(listener)
    _summary(names, statistics)
    return query


def _summary(names: list[str], statistics: Any) -> None:
    for name in names:
        try:
            log.info("%s: %s", name, statistics(name).summary())
        except LookupError:  # Spark Connect: no accumulators, no metrics
            log.info("%s: no metrics (Spark Connect has no accumulators)", name)


def quiet_logging() -> None:
    """Our lines at INFO, everyone else's (py4j's chatter included) at WARNING."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("enrich").setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", required=True, help="a YAML, JSON or TOML job config")
    parser.add_argument(
        "--duration", type=float, default=None, help="stop a streaming job after SECONDS"
    )
    args = parser.parse_args(argv)
    quiet_logging()
    try:
        config = _config.load(args.config)
        from enrich.spark import session

        spark = session(config.name, spark__ui__showConsoleProgress="false")
    except (ConfigError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    spark.sparkContext.setLogLevel("WARN")
    try:
        run(spark, config, args.duration)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        spark.stop()  # drains the listener bus while this process can still answer it
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
