"""docs/deploy.md's standalone cluster, done as it says: a master and two workers from
pyspark's own ``spark-class`` (processes of their own, loopback ports), the job config
submitted with ``spark-submit --master spark://...``, the package shipped with
``--py-files`` and the executors' Python named by ``spark.pyspark.python`` (the venv
every node has). The job (redis-stream -> lookup_join -> the exactly-once redis sink)
must run tasks on executors of both workers (the event log says which executor ran
each task, and each executor's log address names its worker), write every order once,
and sum both executors' metrics; every process the cluster started stops afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.spark_cluster import HOST, StandaloneCluster, standalone_cluster

pytest.importorskip("pyspark", reason="the cluster test needs pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
ORDERS = 2_000
USERS = 7


def package_zip(tmp_path: Path) -> Path:
    """enrich, connectors and jobs as one zip for ``--py-files`` (pure Python)."""
    path = tmp_path / "spark_enrich.zip"
    with zipfile.ZipFile(path, "w") as z:
        for name in ("enrich", "connectors", "jobs"):
            for file in sorted((ROOT / name).rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts:
                    z.write(file, file.relative_to(ROOT))
    return path


def job_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        f"""
name: on-a-cluster
source:
  format: redis-stream
  schema: "stream_id string, order_id long, user_id long"
  options: {{url: "{url}", stream: orders, partitionsPerStream: "2"}}
stores:
  users: {{kind: redis, url: "{url}", key_template: "user:{{}}", value: json,
          schema: "name string, tier string", pool_size: 2}}
joins: [{{store: users, on: user_id, how: left, name: users}}]
sink:
  format: redis
  options: {{url: "{url}", stream: enriched}}
checkpoint: "{tmp_path / "checkpoint"}"
trigger: availableNow
"""
    )
    return path


def submit(
    cluster: StandaloneCluster, tmp_path: Path, config: Path
) -> subprocess.CompletedProcess[str]:
    events = tmp_path / "events"
    events.mkdir()
    conf = {
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        "spark.driver.memory": "512m",
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.pyspark.python": sys.executable,  # the venv every node has
        "spark.ui.enabled": "false",
        # the first micro-batch waits for both executors, so both get tasks
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",  # JSON lines the test reads (4.x: zstd)
    }
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)  # the driver and the executors import the shipped zip
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", cluster.master_url]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += ["--py-files", str(package_zip(tmp_path)), str(ROOT / "jobs" / "enrich_job.py"),
                "--config", str(config)]  # fmt: skip
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=500, check=False
    )


def tasks_by_worker(events: Path, cluster: StandaloneCluster) -> dict[int, int]:
    """Tasks per worker (by its web UI port, which each executor's log address names)."""
    # Spark 4 writes a rolling event log: a folder of events_N_<app> files
    logs = sorted(f for f in events.rglob("*") if f.is_file() and f.name.startswith("events"))
    lines = [line for log in logs for line in log.read_text().splitlines() if line]
    worker_of: dict[str, int] = {}
    tasks: dict[int, int] = {}
    for line in lines:
        event: dict[str, Any] = json.loads(line)
        if event["Event"] == "SparkListenerExecutorAdded":
            urls = " ".join(event["Executor Info"].get("Log Urls", {}).values())
            for worker in cluster.workers:
                if f":{worker.ui_port}/" in urls:
                    worker_of[event["Executor ID"]] = worker.ui_port
        elif event["Event"] == "SparkListenerTaskEnd":
            port = worker_of[event["Task Info"]["Executor ID"]]
            tasks[port] = tasks.get(port, 0) + 1
    return tasks


def test_a_job_runs_on_both_workers_of_a_standalone_cluster(
    tmp_path: Path, redis_server: Any
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.delete("orders", "enriched")
    for user in range(USERS):
        client.set(f"user:{user}", json.dumps({"name": f"n{user}", "tier": "gold"}))
    pipe = client.pipeline(transaction=False)
    for i in range(ORDERS):
        pipe.xadd("orders", {"order_id": i, "user_id": i % USERS})
    pipe.execute()
    config = job_config(tmp_path, redis_server.url)

    with standalone_cluster(tmp_path / "cluster", workers=2, cores=1, memory="512m") as cluster:
        done = submit(cluster, tmp_path, config)
        assert done.returncode == 0, done.stderr[-4000:]
        by_worker = tasks_by_worker(tmp_path / "events", cluster)
    assert cluster.left == {}, f"processes of the cluster left running: {cluster.left}"

    print(f"tasks per worker (web UI port): {by_worker}")
    assert sorted(by_worker) == sorted(w.ui_port for w in cluster.workers), by_worker
    # both executors' metrics, summed on the driver
    assert f"users: rows {ORDERS}->{ORDERS}" in done.stdout + done.stderr
    ids = [int(f[b"order_id"]) for _, f in client.xrange("enriched", "-", "+")]
    assert len(ids) == ORDERS and set(ids) == set(range(ORDERS))
    names = {f[b"name"] for _, f in client.xrange("enriched", "-", "+")}
    assert names == {f"n{u}".encode() for u in range(USERS)}
