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
from tests.support.kafka_fixtures import kafka_broker, kafka_topic
from tests.support.redis_fixtures import redis_client, redis_server
from tests.support.spark_version import requires_spark, spark_version

__all__ = (
    "http_server",
    "http_server_session",
    "kafka_broker",
    "kafka_topic",
    "redis_client",
    "redis_server",
    "requires_spark",
    "spark",
    "spark_version",
)

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("pyspark", reason="the Spark tests need pyspark")


# What the Spark session's start-up may take on top of a test's own timeout: ~15 s on a
# quiet machine, 60-90 s on a loaded 2-core one. pytest-timeout counts a fixture's set-up
# in the first test that uses it, and a timeout inside a py4j call leaves the gateway out
# of step, failing every later Spark test of the session: so the first test gets this.
SPARK_START_ALLOWANCE = 300.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    first = next((item for item in items if "spark" in getattr(item, "fixturenames", ())), None)
    if first is not None:
        own = _timeout_of(config, first)
        if own > 0:
            first.add_marker(pytest.mark.timeout(own + SPARK_START_ALLOWANCE), append=False)
    if spark_version() >= (4, 3):
        return
    # pyspark 3.5's, 4.0's and 4.1's driver leaves the local sockets it reads query results
    # from to the garbage collector (4.3 closes them; 4.2 is not tested); the
    # ResourceWarning is pyspark's, not this project's.
    quiet = pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
    )
    for item in items:
        item.add_marker(quiet)


def _timeout_of(config: pytest.Config, item: pytest.Item) -> float:
    """The timeout pytest-timeout would give ``item``: its marker's, else the option's."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
        if value is not None:
            return float(value)
    option = config.getoption("timeout", None)
    if option is None:
        option = config.getini("timeout")
    return float(option or 0)


def _kafka_jars() -> dict[str, str]:
    """``spark.jars`` naming Spark's Kafka connector (4.2.0, the newest Maven Central
    serves), on pyspark 4.2+ only: an older Spark would fail to load its classes."""
    from enrich.demo.kafka_broker import BrokerUnavailable, connector_jars

    if spark_version() < (4, 2):
        return {}
    try:
        return {"spark__jars": ",".join(str(jar) for jar in connector_jars())}
    except BrokerUnavailable:
        return {}


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
        # How long the JVM and a Python process it starts wait for each other's socket
        # (15 s by default): on a loaded 2-core machine pyspark 4.1's runner of a Python
        # streaming source missed that every time ("Python worker failed to connect back").
        spark__python__authenticate__socketTimeout="120s",
        # Spark's Kafka connector, when scripts/kafka/fetch has run (tests/spark/kafka).
        **_kafka_jars(),
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()
