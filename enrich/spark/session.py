"""A SparkSession with what spark-enrich needs."""

from __future__ import annotations

import os
import re
import shutil
import sys

from pyspark.sql import SparkSession

DAEMON_CONF = "spark.python.daemon.module"
WARM_DAEMON = "enrich.spark.warm_daemon"


def session(
    app_name: str = "enrich",
    master: str | None = None,
    *,
    warm_workers: bool | None = None,
    **conf: str,
) -> SparkSession:
    """A SparkSession with what spark-enrich needs, after checking for Java.

    Sets ``PYSPARK_PYTHON`` to this interpreter when unset (Spark's Python workers must
    import pyarrow and enrich), and applies ``conf`` (dots written as ``__``:
    ``spark__sql__shuffle__partitions="4"``).

    ``warm_workers``: fork Spark's Python workers from :mod:`enrich.spark.warm_daemon`,
    a daemon that has imported pyspark's worker, pyarrow, the store clients and this
    package once, so a fresh worker starts without importing them (``docs/latency.md``,
    "A worker that starts warm"). None (the default) turns it on for a local master
    (``local``, ``local[N]``, or no master at all, Spark's ``local[*]``), where the
    workers run this very interpreter; on a cluster it needs the package installed on
    the executors (not only shipped with ``--py-files``), so it is opt-in there: True.
    A ``spark.python.daemon.module`` given in ``conf`` (or to spark-submit) wins. Read
    when the SparkContext starts: a session that already runs keeps its daemon.

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
    if warm_workers is None:
        warm_workers = _is_local(master or settings.get("spark.master") or _submitted_master())
    if warm_workers and DAEMON_CONF not in settings and not _submitted(DAEMON_CONF):
        settings[DAEMON_CONF] = WARM_DAEMON
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _is_local(master: str | None) -> bool:
    """A master whose executors are this driver (Spark's default when none is set)."""
    return master is None or master == "local" or master.startswith("local[")


def _submitted_master() -> str | None:
    """The master spark-submit was given (``PYSPARK_SUBMIT_ARGS`` for a plain Python
    driver; ``spark.master`` in the environment's conf under spark-submit), or None."""
    found = re.search(r"--master[ =](\S+)", os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if found:
        return found.group(1)
    return _submitted("spark.master")


def _submitted(key: str) -> str | None:
    """``key`` as spark-submit set it for this driver (its JVM is already running and
    passes its conf to the SparkContext), or None when this process starts the JVM."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM (no new one)
    return SparkConf().get(key, None)
