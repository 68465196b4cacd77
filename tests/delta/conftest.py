"""The Delta tests' session: pyspark 4.2 (the newest Spark line Delta supports) with
Delta's jars and Spark's Kafka connector, a real Kafka broker and a real Redis.

They run in the Delta venv (``./scripts/dev test-delta``: ``.venv-delta``, pyspark 4.2
with ``delta-spark``); on any other pyspark they skip, saying where they run. In the
Delta venv, without Delta's jars (``scripts/delta/fetch``) or the ``delta`` package they
skip too, unless ``ENRICH_REQUIRE_DELTA=1`` (CI), where they fail instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_fixtures import kafka_broker, kafka_topic
from tests.support.redis_fixtures import redis_client, redis_server
from tests.support.spark_version import spark_version

__all__ = (
    "delta_available",
    "delta_spark",
    "kafka_broker",
    "kafka_topic",
    "redis_client",
    "redis_server",
)

DELTA_LINE = (4, 2)  # the Spark line of scripts/delta/pom.xml's delta-spark artifact
ROOT = Path(__file__).resolve().parents[2]


def spark_env() -> dict[str, str]:
    """What Spark's Python workers need: this interpreter, and the repository importable."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
    }


def delta_conf() -> dict[str, str]:
    """The session's Delta and Kafka settings; skips (or fails) the test without them."""
    if spark_version() != DELTA_LINE:
        pytest.skip(
            f"the Delta tests run on pyspark {DELTA_LINE[0]}.{DELTA_LINE[1]}, in a venv of "
            "their own: ./scripts/dev test-delta"
        )
    from enrich.demo.kafka_broker import BrokerUnavailable, connector_jars
    from enrich.spark.sink.delta.jars import DeltaUnavailable, delta_conf as conf_of

    try:
        import delta  # noqa: F401 (the Python package pins the Spark line)

        conf = conf_of(snapshot_partitions=2)
        kafka = [str(jar) for jar in connector_jars()]
    except (ImportError, DeltaUnavailable, BrokerUnavailable) as exc:
        if os.environ.get("ENRICH_REQUIRE_DELTA") == "1":
            pytest.fail(f"ENRICH_REQUIRE_DELTA=1 and Delta cannot run: {exc}", pytrace=False)
        pytest.skip(f"Delta cannot run here: {exc}")
    conf["spark.jars"] = ",".join([conf["spark.jars"], *kafka])
    return conf


@pytest.fixture
def delta_available() -> dict[str, str]:
    """Delta's session settings, for a test that starts its own Spark processes; skips
    (or fails) as :func:`delta_conf` says."""
    return delta_conf()


@pytest.fixture(scope="session")
def delta_spark() -> Iterator[Any]:
    """A local[2] session with Delta's and Kafka's jars, shared by the Delta tests."""
    from enrich.spark import session

    conf = delta_conf()
    os.environ.update(spark_env())
    spark = session(
        "enrich-delta-tests",
        "local[2]",
        spark__ui__enabled="false",
        spark__ui__showConsoleProgress="false",
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="2",
        spark__sql__session__timeZone="UTC",
        spark__python__worker__reuse="true",
        spark__driver__memory="1g",
        spark__python__authenticate__socketTimeout="120s",
        **{key.replace(".", "__"): value for key, value in conf.items()},
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()
