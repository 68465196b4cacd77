"""The session helper's warm start: asked for (``warm_start=True``), a fresh session starts
the Python processes a streaming query's first micro-batch waits for (the driver-side
planners of a Python source and sink, the sink's commit runner, the executor's daemon)
before it returns, and leaves no query running; on the defaults it starts none.

Each test is a fresh driver process: the warm start runs only when ``session()`` starts
the SparkContext, which the suite's shared session already did.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import spark_env

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]

# The driver: a session, then the Python processes its JVM runs
# (children and their children: a daemon and the workers it forked), by command line.
DRIVER = """
import json, os, sys
from enrich.spark import session

warm = {"warm_start": True} if sys.argv[1] == "on" else {}  # off: the defaults
if sys.argv[1] == "nofork":
    warm = {"fork_server": False}
spark = session("enrich-warm-start-test", "local[1]", **warm,
                spark__ui__enabled="false", spark__python__worker__reuse="true",
                spark__python__authenticate__socketTimeout="120s")
pipelined = spark.sparkContext.getConf().get("spark.python.udf.pipelined.enabled", None)

def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent == pid:
                found.append(int(entry))
        except OSError:
            continue
    return found

def command(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\\0", b" ").decode()

processes, todo = [], children(os.getpid())
while todo:
    pid = todo.pop()
    todo.extend(children(pid))
    try:
        processes.append(command(pid))
    except OSError:
        continue
active = len(spark.streams.active)
with open(f"/proc/{spark.sparkContext._gateway.proc.pid}/environ", "rb") as f:
    jvm_env = dict(v.decode().split("=", 1) for v in f.read().split(b"\\0") if b"=" in v)
spark.stop()
print(json.dumps({"active": active, "processes": processes, "pipelined": pipelined,
                  "python": spark.sparkContext.pythonExec, "executable": sys.executable,
                  "jvm_python": jvm_env.get("PYSPARK_PYTHON"),
                  "own_python": os.environ.get("PYSPARK_PYTHON")}))
"""


def _driver(warm_start: str) -> dict[str, object]:
    env = dict(os.environ, **spark_env())
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, warm_start],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _planners(processes: object) -> set[str]:
    assert isinstance(processes, list)
    names = {
        "pyspark.sql.worker.create_data_source",
        "pyspark.sql.worker.plan_data_source_read",
        "pyspark.sql.worker.write_into_data_source",
        "pyspark.sql.worker.python_streaming_sink_runner",
    }
    return {name for name in names if any(name in command for command in processes)}


def test_a_warm_session_starts_the_query_processes_before_any_query() -> None:
    result = _driver("on")
    assert result["active"] == 0  # the warm-up query stopped
    processes = result["processes"]
    # Spark keeps each planner's daemon (and its idle worker) for the next query.
    assert _planners(processes) == {
        "pyspark.sql.worker.create_data_source",
        "pyspark.sql.worker.plan_data_source_read",
        "pyspark.sql.worker.write_into_data_source",
        "pyspark.sql.worker.python_streaming_sink_runner",
    }
    # The executor's daemon: this package's warm daemon, forking the workers.
    daemon = re.compile(r"-m enrich\.spark\.session( |$)")
    assert any(daemon.search(command) for command in processes)  # type: ignore[union-attr]


def test_the_defaults_start_none_and_leave_sparks_transfer_settings_alone() -> None:
    result = _driver("off")
    assert _planners(result["processes"]) == set()
    assert result["pipelined"] is None  # Spark's own default (off), not set by session()
    # Spark runs its Python processes through the fork server's launcher on a local master
    python = str(result["python"])
    assert Path(python).parent.name.startswith("enrich-fork-")
    assert any("enrich.spark.session.forkserver" in c for c in result["processes"])  # type: ignore[union-attr]
    # and so does the JVM itself (its lookup of Python data sources); the driver's own
    # environment is left as it was
    assert result["jvm_python"] == python
    assert result["own_python"] != python


def test_the_fork_server_can_be_turned_off() -> None:
    result = _driver("nofork")
    assert result["python"] == result["executable"]
    assert result["jvm_python"] == result["own_python"]
    assert not any("forkserver" in c for c in result["processes"])  # type: ignore[union-attr]
