"""docs/deploy.md, done as it says: a wheel of the package shipped with spark-submit to a
local-cluster of two executor JVMs, the job config read on the driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]


def test_spark_submit_on_local_cluster_with_the_wheel(
    tmp_path: Path, redis_server: Any, redis_client: Any
) -> None:
    for uid in range(3):
        redis_client.set(f"user:{uid}", json.dumps({"name": f"n{uid}", "tier": "t"}))
    # Built from a copy: an in-tree build would leave build/ in the repository.
    source = tmp_path / "source"
    for name in ("enrich", "connectors", "jobs"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheel_dir = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            str(source),
            "-w",
            str(wheel_dir),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheel_dir.glob("spark_enrich-*.whl")
    data = tmp_path / "orders"
    data.mkdir()
    rows = [{"order_id": i, "user_id": i % 4} for i in range(40)]
    (data / "part-0.json").write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "out"
    job = tmp_path / "job.yaml"
    job.write_text(
        f"""
source: {{format: files, path: "{data}", schema: "order_id long, user_id long"}}
stores:
  users: {{kind: redis, url: "${{TEST_DEPLOY_REDIS}}", key_template: "user:{{}}",
          value: json, schema: "name string, tier string", pool_size: 2}}
joins: [{{store: users, on: user_id, how: inner, name: deployed}}]
sink: {{format: files, path: "{out}"}}
checkpoint: "{tmp_path / "checkpoint"}"
"""
    )
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {
        **os.environ,
        "TEST_DEPLOY_REDIS": redis_server.url,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("PYTHONPATH", None)  # the executors get the package from the shipped wheel
    done = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local-cluster[2,1,1024]",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            "spark.ui.enabled=false",
            "--py-files",
            str(wheel),
            str(ROOT / "jobs" / "enrich_job.py"),
            "--config",
            str(job),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=380,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # The job's summary line (the Python driver's output reaches spark-submit's stdout).
    assert "enrich.jobs: deployed: rows 40->30" in done.stdout + done.stderr
    # Spark logs at WARN from the start, as under `enrich run` (a few of SparkContext's
    # first lines come before any setting is read; some hundred without it)
    info = [line for line in done.stderr.splitlines() if " INFO " in line]
    assert len(info) <= 5, "\n".join(info)
    import pyarrow.parquet as pq

    table = pq.read_table(str(out))
    assert table.num_rows == 30 and set(table.column("name").to_pylist()) == {"n0", "n1", "n2"}
