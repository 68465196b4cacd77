"""A SparkSession with what spark-enrich needs, and the daemon its Python workers fork from.

Spark starts one Python *daemon* per executor (``spark.python.daemon.module``, by
default ``pyspark.daemon``) and forks every Python worker from it. A worker forked from
the stock daemon imports ``pyspark.worker``, pyarrow, the store clients and enrich after
the fork: seconds of a fresh worker's start on a 2-core machine, paid by every fresh
worker of every stage (``docs/latency.md``, "A worker that starts warm"). Run as the
daemon module (``python -m enrich.spark.session``, which Spark does when
``spark.python.daemon.module=enrich.spark.session``), this module imports them once, in
the daemon, then hands over to ``pyspark.daemon.manager()``: a worker forked from it
finds them in memory (copy-on-write) and starts its first batch at once, and sets its
socket to the JVM to acknowledge and send at once (:func:`install_prompt`: ~40 ms less
in every task of a Python stage). :func:`session`
sets it on a local master, and there also starts the fork server
(:mod:`enrich.spark.session.forkserver`) that every Python process Spark starts is
forked from; on a cluster, ``--conf
spark.python.daemon.module=enrich.spark.session`` (the executors' Python must import this
package before any task runs: installed, or a packed virtualenv; a package shipped only
with ``--py-files`` reaches the workers, not the daemon, which would then fail to start).

Why importing before the fork is safe: ``pyspark.daemon`` imports the worker after the
fork because pyarrow and pandas start threads on import, and a fork keeps only the
forking thread. pyarrow's threads are its allocator's background thread and its thread
pools, which Arrow re-creates in a forked child (its ``pthread_atfork`` handlers); the
daemon runs no asyncio loop, opens no connection and starts no thread of ours. The
runtime loop, pools, caches and a user's opened AsyncFunction are made after the fork,
in each worker, as before.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shutil
import sys
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from .preload import PRELOAD as PRELOAD, preload
from .worker_socket import install_prompt

if TYPE_CHECKING:
    from .forkserver import ForkServer

DAEMON_CONF = "spark.python.daemon.module"
WARM_DAEMON = "enrich.spark.session"

# True in the daemon and in every worker forked from it (what a test reads in a worker);
# the modules it imported, and the seconds that took.
WARM = False
LOADED: tuple[str, ...] = ()
SECONDS = 0.0


def session(
    app_name: str = "enrich",
    master: str | None = None,
    *,
    warm_workers: bool | None = None,
    warm_start: bool = False,
    fork_server: bool | None = None,
    class_archive: bool | None = None,
    **conf: str,
) -> SparkSession:
    """A SparkSession with what spark-enrich needs, after checking for Java.

    Sets ``PYSPARK_PYTHON`` to this interpreter when unset (Spark's Python workers must
    import pyarrow and enrich), applies ``conf`` (dots written as ``__``:
    ``spark__sql__shuffle__partitions="4"``). Spark's own transfer settings stay Spark's
    (pipelined transfer, Unix domain sockets: measured, no gain or broken, in
    docs/performance.md, "Spark's own levers").

    ``warm_workers``: fork Spark's Python workers from this module's daemon (see the
    module docstring), which has imported pyspark's worker, pyarrow, the store clients
    and this package once. None (the default) turns it on for a local master (``local``,
    ``local[N]``, or none at all: Spark's ``local[*]``), whose workers run this very
    interpreter; on a cluster it needs the package installed on the executors, so it is
    opt-in there (True). A ``spark.python.daemon.module`` given in ``conf`` (or to
    spark-submit) wins. Read when the SparkContext starts: a running one keeps its daemon.

    ``fork_server``: on a local master, run Spark's Python processes (the executors'
    daemon, the driver-side planners and runners of Python data sources, the JVM's own
    lookup of them) as children forked from one interpreter started beside this driver,
    with pyspark and this package imported once (:mod:`enrich.spark.session.forkserver`),
    instead of a fresh interpreter each: a cold streaming query's first row 2.7-3.0 s
    after ``start()`` instead of 7.5-9.4 s on a quiet 2-core machine
    (docs/performance.md). None (the default) follows ``warm_workers``; left off when
    ``PYSPARK_PYTHON`` names another interpreter than this one, and for any master but
    a local one. Read when the SparkContext starts.

    ``class_archive``: start the driver's JVM with Spark's classes mapped from a
    class-data archive (:mod:`enrich.spark.session.class_archive`), written by the first
    such JVM when it exits, in the user's cache folder: a local session 2.3-4.0 s sooner
    and its first query's planning 3-4x shorter on a quiet 2-core machine
    (docs/performance.md, "The class-data archive"). None (the default) turns it on for
    a local master; Java 17 or newer. Read only when this call starts the JVM.

    ``warm_start``: when this call starts the SparkContext, run
    :func:`enrich.spark.warm_up` before returning, so that the Python processes a
    streaming query's first micro-batch waits for (the driver-side planners of a Python
    source and sink, the sink's commit runner, the executors' daemon and workers) are
    running, with this package imported, when the first query starts: its first row
    comes seconds after ``start()`` (measured: docs/performance.md). It costs the
    session those seconds (a tiny streaming query that reads nothing of the user's and
    writes nowhere, stopped before this returns), so from the program's start to the
    first row it saves nothing (measured: docs/performance.md): it pays where a query
    must answer soon after ``start()``. Off by default (a batch job would only wait); a
    failed warm-up warns and leaves the session as it is.

    Raises:
        RuntimeError: no Java runtime was found (Spark needs Java 17 or newer).
    """
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise RuntimeError(
            "Spark needs a Java runtime (17 or newer): no 'java' on PATH and JAVA_HOME is "
            "not set. Install one (e.g. 'apt-get install openjdk-17-jre-headless' or "
            "'brew install openjdk@17') or set JAVA_HOME."
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {key.replace("__", "."): value for key, value in conf.items()}
    local = is_local(master or settings.get("spark.master") or _submitted_master())
    if warm_workers is None:
        warm_workers = local
    if warm_workers and DAEMON_CONF not in settings and not _submitted(DAEMON_CONF):
        settings[DAEMON_CONF] = WARM_DAEMON
    for key, value in settings.items():
        builder = builder.config(key, value)
    from pyspark import SparkContext

    fresh = SparkContext._active_spark_context is None
    if fork_server is None:
        fork_server = warm_workers
    fork = _fork_server() if fresh and local and fork_server and _own_python() else None
    if class_archive is None:
        class_archive = local
    # Only for a JVM this call starts (a stopped context's JVM, or spark-submit's, runs).
    launch = SparkContext._gateway is None and not os.environ.get("PYSPARK_GATEWAY_PORT")
    options = _archive_options(settings) if launch and class_archive else None
    launched: dict[str, str] = {}
    if options:  # added to the driver JVM's command line, beside the user's options
        before = os.environ.get("SPARK_SUBMIT_OPTS")
        launched["SPARK_SUBMIT_OPTS"] = f"{before} {options}" if before else options
    if fork is not None and launch:
        # The JVM's own Python (what it runs without a SparkContext's pythonExec: the
        # session's lookup of Python data sources, ~1 s fresh) forked too.
        launched["PYSPARK_PYTHON"] = fork.launcher
    with _environment(launched):
        spark = builder.getOrCreate()
    if fork is not None:
        spark.sparkContext.pythonExec = fork.launcher
    if fresh and warm_start:
        _warm_start(spark)
    return spark


# The fork server of this driver (one for the process's life, shared by its sessions).
_FORK: ForkServer | None = None


def _fork_server() -> ForkServer | None:
    global _FORK
    from .forkserver import start

    if _FORK is None or not _FORK.running():
        _FORK = start()
    return _FORK


def _archive_options(settings: dict[str, str]) -> str | None:
    from .class_archive import java_options

    try:
        return java_options(settings)
    except OSError:  # only a head start: the JVM starts as it would without
        return None


@contextlib.contextmanager
def _environment(updates: dict[str, str]) -> Iterator[None]:
    # What the JVM started inside is launched with (pyspark's gateway copies os.environ),
    # and nothing after: this driver's own children keep their environment.
    before = {name: os.environ.get(name) for name in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _own_python() -> bool:
    # Spark starts its Python processes with the SparkContext's pythonExec, read from
    # PYSPARK_PYTHON when the context starts: forked from this interpreter only if it
    # is this one (a caller who chose another keeps it).
    python = os.environ["PYSPARK_PYTHON"]
    return os.path.abspath(shutil.which(python) or python) == os.path.abspath(sys.executable)


def _warm_start(spark: SparkSession) -> None:
    # A cold streaming query on a local master waited for Spark to start, one after
    # another, the driver's planner processes and the executors' daemon
    # (benchmarks/start_trace.py; docs/performance.md, "Where a cold query's first
    # seconds go"). Spark keeps those daemons for the SparkContext's life,
    # so started here the first query finds them running. Run before returning: started
    # in the background, a query built at once trailed the warm-up and gained nothing
    # (16.5 s against 16.9, 2026-12-06).
    try:
        from ..queries.latency import warm_up
    except ImportError:  # a pyspark without Python streaming data sources (before 4.1)
        return
    try:
        warm_up(spark)
    except Exception as exc:  # only a head start: a query starts its processes anyway
        warnings.warn(f"enrich: warming the session's Python processes failed: {exc}",
                      RuntimeWarning, stacklevel=3)  # fmt: skip


def is_local(master: str | None) -> bool:
    """Whether ``master`` runs the executors in this driver (Spark's default: none set)."""
    return master is None or master == "local" or master.startswith("local[")


def _submitted_master() -> str | None:
    """The master spark-submit was given (``PYSPARK_SUBMIT_ARGS`` for a plain Python
    driver; the conf of spark-submit's JVM under spark-submit), or None."""
    found = re.search(r"--master[ =](\S+)", os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if found:
        return found.group(1)
    return _submitted("spark.master")


def _submitted(key: str) -> str | None:
    """``key`` as spark-submit set it for this driver (its JVM is already running and
    hands its conf to the SparkContext), or None when this process starts the JVM."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM (no new one)
    return SparkConf().get(key, None)


def daemon() -> None:
    """Preload, then run PySpark's own daemon (it returns only when Spark stops it)."""
    global WARM, LOADED, SECONDS
    started = time.perf_counter()
    LOADED = preload()
    # Out of the collector's sight: pyspark's daemon runs gc.collect() in a worker after
    # every task, and a collection walks (and so copies, page by page, out of the shared
    # copy-on-write memory) every object the daemon imported: 240-780 ms a collection at
    # load ~20, 0.0 ms frozen (2026-11-27). The modules live as long as the process.
    gc.collect()
    gc.freeze()
    SECONDS = time.perf_counter() - started
    WARM = True
    import pyspark.daemon

    install_prompt(pyspark.daemon)  # the JVM's input without a 40 ms wait a task
    manager = getattr(pyspark.daemon, "manager", None)
    if manager is None:  # pragma: no cover - a pyspark whose daemon has no manager()
        import runpy

        runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
        return
    manager()
