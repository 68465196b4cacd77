"""What both spark-submit jobs do around their own work, written once.

:func:`main` is the whole frame: logging, the config (and whatever else the job reads
before Spark starts), the session, then the job's own body, and how the run ends: exit
code 0, or one line on standard error and :data:`~jobs._outcome.EXIT_FAILED` (the
query failed; its trace in the log file), :data:`~jobs._outcome.EXIT_BAD_CONFIG` or
:data:`~jobs._outcome.EXIT_TOO_MANY_ERRORS`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Callable
from typing import Any

from jobs import _config, _outcome
from jobs._files import ConfigError

log = logging.getLogger("enrich.jobs")

Body = Callable[[Any], None]  # the job's own work, given the started session
# config -> the body and the names its metrics are filed under; may raise ConfigError
Prepare = Callable[[_config.JobConfig], tuple[Body, list[str]]]


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
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve the job's metrics for Prometheus at http://<driver>:PORT/metrics "
        "while it runs (needs the metrics extra: prometheus-client)",
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


def quiet_logging() -> None:
    """Our lines at INFO, everyone else's (py4j's chatter included) at WARNING."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("enrich").setLevel(logging.INFO)


def start_spark(config: _config.JobConfig, log_file: Any, own_output: bool) -> Any:
    """A session logging at WARN from its start (``spark.log.level``: under spark-submit
    the JVM logs some hundred INFO lines otherwise), its JVM's standard error sent to
    ``log_file`` if asked."""
    from enrich.spark import session

    if own_output:
        log.info("Spark's own output goes to %s", log_file)
    with _outcome.stderr_to(log_file) if own_output else contextlib.nullcontext():
        return session(
            config.name,
            spark__ui__showConsoleProgress="false",
            spark__log__level="WARN",
            **_connectors(config),
        )


def _connectors(config: _config.JobConfig) -> dict[str, Any]:
    """Kafka's connector and Delta's jars and settings, as the job needs them (their
    ``spark.jars`` joined).

    Raises:
        RuntimeError: the job writes Delta and Delta cannot run here (no jars, or another
            Spark line: the message says which and what to run).
    """
    conf = _kafka_connector(config)
    endpoints = (config.sink, config.dead_letter)
    if any(e is not None and e.format == "delta" for e in endpoints):
        from enrich.spark.sink.delta.jars import DeltaUnavailable, delta_conf, jars_dir

        try:
            delta = delta_conf()
        except DeltaUnavailable as exc:
            raise RuntimeError(f"the job writes Delta: {exc}") from None
        jars = [conf.get("spark__jars"), delta.pop("spark.jars")]
        conf["spark__jars"] = ",".join(j for j in jars if j)
        conf.update({key.replace(".", "__"): value for key, value in delta.items()})
        log.info("Delta Lake's jars: %s", jars_dir())
    return conf


def _kafka_connector(
    config: _config.JobConfig,
) -> dict[str, Any]:  # session()'s **conf (str values)
    """``spark.jars`` naming Spark's Kafka connector when the job reads or writes Kafka
    and scripts/kafka/fetch has fetched it (or ``$ENRICH_KAFKA_JARS`` holds it); else
    nothing (under spark-submit, pass ``--packages
    org.apache.spark:spark-sql-kafka-0-10_2.13:<Spark's version>``)."""
    from enrich.demo.kafka_broker import BrokerUnavailable, connector_jars

    endpoints = (config.source, config.sink, config.dead_letter)
    if not any(e is not None and e.format == "kafka" for e in endpoints):
        return {}
    try:
        jars = connector_jars()
    except BrokerUnavailable:
        return {}
    log.info("Spark's Kafka connector: %s", ", ".join(j.name for j in jars[:1]))
    return {"spark__jars": ",".join(str(jar) for jar in jars)}


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


def _serve_metrics(spark: Any, port: int | None) -> Any:
    """``/metrics`` on ``port`` for the run (None: no port, nothing served)."""
    if port is None:
        return None
    from enrich.spark import serve_metrics

    return serve_metrics(spark, port)


def main(args: argparse.Namespace, prepare: Prepare) -> int:
    """Run a job as its command line (``args``, from :func:`arguments`) says; the exit code.

    ``prepare`` reads what the job needs besides its config, before Spark starts (a
    :class:`ConfigError` there exits 2 as a bad config does).
    """
    quiet_logging()
    try:
        config = _config.load(args.config)
        body, names = prepare(config)
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
    try:
        served = _serve_metrics(spark, args.metrics_port)
    except (ImportError, OSError) as exc:
        spark.stop()
        print(f"error: --metrics-port: {exc}", file=sys.stderr)
        return _outcome.EXIT_BAD_CONFIG
    try:
        body(spark)
    except ConfigError as exc:  # found as the query starts (a join's missing column...)
        print(f"error: {exc}", file=sys.stderr)
        return _outcome.EXIT_BAD_CONFIG
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    except Exception as exc:  # the query failed: one line here, the trace in the log
        failure = exc
    finally:
        spark.stop()  # drains the listener bus while this process can still answer it
        if served is not None:
            served.close()
    if failure is not None:
        return _outcome.report(failure, log_file)
    too_many = _outcome.over_ratio(totals(names), config.max_error_ratio)
    if too_many is not None:
        print(f"error: {too_many}", file=sys.stderr)
        return _outcome.EXIT_TOO_MANY_ERRORS
    return 0
