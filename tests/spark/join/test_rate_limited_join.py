"""A Spark job under a job rate limit far below its demand, every other option on its
default: rows wait for their permits longer than the join's timeout, and none fails."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession, functions as F

from connectors.http import HttpLookup
from enrich.engine.wait_settings import DEFAULT_TIMEOUT
from enrich.protect import JobRateLimit
from enrich.spark import lookup_join, statistics
from tests.support.http_server import HttpTestServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

ROWS = 360
# Unlimited, the job sends its 360 requests in well under a second: a quota of 30/s is
# far below a quarter of its demand, and keeps the last rows waiting about 12 s.
RATE = 30.0


def test_rows_waiting_for_permits_past_the_timeout_do_not_fail(
    spark: SparkSession, http_server: HttpTestServer, redis_server: Any, redis_client: Any
) -> None:
    for key in range(ROWS):
        http_server.data[str(key)] = {"name": f"user-{key}"}
    source = HttpLookup(
        http_server.url("/users/{}"),
        schema="name string",
        job_rate_limit=JobRateLimit(rate=RATE, redis_url=redis_server.url),
    )
    df = spark.range(0, ROWS, numPartitions=2).withColumn("k", F.col("id").cast("string"))

    got = lookup_join(df, source, on="k", name="quota").collect()  # on_error="fail", 10 s

    assert sorted((row.k, row.name) for row in got) == sorted(
        (str(key), f"user-{key}") for key in range(ROWS)
    )
    starts = sorted(request.started for request in http_server.requests)
    assert len(starts) == ROWS
    # The service saw the quota kept, so the last rows waited longer than the timeout.
    assert starts[-1] - starts[0] > DEFAULT_TIMEOUT
    # The waits are in the join's metrics (what /metrics serves as rate_limit_wait_*).
    metrics = statistics("quota")
    assert 0 < metrics.rate_limit_waits <= ROWS
    assert metrics.rate_limit_wait_seconds > DEFAULT_TIMEOUT
