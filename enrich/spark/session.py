"""A SparkSession with what spark-enrich needs."""

from __future__ import annotations

import os
import shutil
import sys

from pyspark.sql import SparkSession


def session(app_name: str = "enrich", master: str | None = None, **conf: str) -> SparkSession:
    """A SparkSession with what spark-enrich needs, after checking for Java.

    Sets ``PYSPARK_PYTHON`` to this interpreter when unset (Spark's Python workers must
    import pyarrow and enrich), and applies ``conf`` (dots written as ``__``:
    ``spark__sql__shuffle__partitions="4"``).

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
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    return builder.getOrCreate()
