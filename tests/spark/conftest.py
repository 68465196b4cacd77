"""One local Spark session for every Spark test, plus real Redis and HTTP servers.

Spark's Python workers are other processes: they import ``tests.spark.sources`` (so the
repository root goes on their ``PYTHONPATH``) and reach the servers by their URLs.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.http_fixtures import http_server, http_server_session
from tests.support.redis_fixtures import redis_client, redis_server
from tests.support.spark_version import requires_spark, spark_version

__all__ = (
    "http_server",
    "http_server_session",
    "redis_client",
    "redis_server",
    "requires_spark",
    "spark",
    "spark_version",
)

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("pyspark", reason="the Spark tests need pyspark")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if spark_version() >= (4, 1):
        return
    # pyspark 3.5's and 4.0's driver leaves the local sockets it reads query results from to the
    # garbage collector; the ResourceWarning is pyspark's, not this project's.
    quiet = pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
    )
    for item in items:
        item.add_marker(quiet)


def spark_env() -> dict[str, str]:
    """What Spark's Python workers need: this interpreter, and the repository importable."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        # Absolute: executors of a local-cluster start workers from their own directory.
        "PYSPARK_PYTHON": _absolute(os.environ.get("PYSPARK_PYTHON", sys.executable)),
        "PYSPARK_DRIVER_PYTHON": _absolute(os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable)),
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
    }


def _absolute(program: str) -> str:
    found = shutil.which(program)
    return os.path.abspath(found) if found else program


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession shared by the whole session (start-up takes ~15 s)."""
    from enrich.spark import session

    os.environ.update(spark_env())
    spark = session(
        "enrich-tests",
        "local[2]",
        spark__ui__enabled="false",
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="2",
        spark__sql__session__timeZone="UTC",
        spark__python__worker__reuse="true",
        spark__sql__execution__arrow__maxRecordsPerBatch="100",
        spark__driver__memory="1g",
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()
