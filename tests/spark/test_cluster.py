"""A multi-executor run: local-cluster[2,1,1024] from the pip-installed pyspark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import redis

from tests.spark.conftest import ROOT, spark_env

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


def test_two_executors_enrich_and_report_metrics(
    redis_server: Any, redis_client: redis.Redis
) -> None:
    for i in range(3):  # u3 is a miss
        redis_client.set(f"user:u{i}", json.dumps({"name": f"N{i}"}))
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.cluster_job", redis_server.url],
        cwd=ROOT,
        env={**os.environ, **spark_env()},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows"] == 400
    assert result["names"] == [["u0", "N0"], ["u1", "N1"], ["u2", "N2"], ["u3", None]]
    assert result["pids"] >= 2  # Python workers of both executors took part
    assert result["rows_in"] == 400  # the accumulator summed both executors' metrics
