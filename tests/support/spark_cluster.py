"""A Spark standalone cluster on loopback: a master and workers, each a process of its
own started from pyspark's own ``bin/spark-class``, as an operator starts them.

:func:`standalone_cluster` starts the master, waits for its web UI to answer, starts
the workers (each with its own port, web UI port, cores, memory and work folder), and
waits until the master lists them all as alive. On the way out every process the
cluster started (the daemons, the executor JVMs the workers launched, their Python
workers) is stopped, and :attr:`StandaloneCluster.left` names those still running after
a grace (a test asserts it is empty).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from enrich.demo.local import free_port

from .processes import descendants, wait_gone

HOST = "127.0.0.1"
START_TIMEOUT = 180.0  # the master up, the workers registered (a loaded 2-core machine)


def spark_home() -> Path:
    """The pyspark package's folder: it holds ``bin/spark-class`` and Spark's jars."""
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    port: int
    ui_port: int
    work_dir: Path


@dataclass
class StandaloneCluster:
    master_url: str  # spark://127.0.0.1:PORT
    ui_port: int
    master: subprocess.Popen[bytes]
    workers: list[Worker]
    left: dict[int, str] = field(default_factory=dict)  # after stop(): still running

    def state(self) -> dict[str, object]:
        """The master's view (its web UI's ``/json``: workers, applications)."""
        with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json", timeout=10) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def alive_workers(self) -> int:
        try:
            workers = self.state().get("workers", [])
        except OSError:  # not listening yet
            return 0
        return sum(1 for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE")

    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [w.process for w in self.workers] + [self.master]

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM to every daemon (workers first: each kills its executors), SIGKILL to
        what outlives ``grace``; records what is left of their process trees."""
        tree: dict[int, str] = {}
        for process in self.processes():
            tree.update(descendants(process.pid))
        for process in self.processes():
            if process.poll() is None:
                process.terminate()
        for process in self.processes():
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.left = wait_gone(tree, timeout=grace)


def _daemon(
    directory: Path, name: str, args: list[str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{name}.log").open("wb") as log:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait(
    condition: Callable[[], bool], what: str, processes: list[subprocess.Popen[bytes]], log: Path
) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not condition():
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{what}: a daemon exited ({process.returncode}); see {log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {START_TIMEOUT}s; see {log}")
        time.sleep(0.5)


@contextlib.contextmanager
def standalone_cluster(
    directory: Path, *, workers: int = 2, cores: int = 1, memory: str = "512m"
) -> Iterator[StandaloneCluster]:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, their
    logs and work folders under ``directory``; stopped on the way out."""
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=HOST)
    env["SPARK_DAEMON_MEMORY"] = "256m"  # the master's and workers' own heaps
    env.pop("PYTHONPATH", None)  # the executors get the code the job ships, nothing else
    port, ui_port = free_port(), free_port()
    master = _daemon(
        directory,
        "master",
        ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port),
         "--webui-port", str(ui_port)],
        env,
    )  # fmt: skip
    cluster = StandaloneCluster(f"spark://{HOST}:{port}", ui_port, master, [])
    try:
        _wait(lambda: _answers(cluster), "the master", [master], directory / "master.log")
        for i in range(workers):
            work_dir = directory / f"worker-{i}"
            w_port, w_ui = free_port(), free_port()
            process = _daemon(
                work_dir,
                "worker",
                ["org.apache.spark.deploy.worker.Worker", "--host", HOST, "--port", str(w_port),
                 "--webui-port", str(w_ui), "--cores", str(cores), "--memory", memory,
                 "--work-dir", str(work_dir / "work"), cluster.master_url],
                env,
            )  # fmt: skip
            cluster.workers.append(Worker(process, w_port, w_ui, work_dir))
        _wait(lambda: cluster.alive_workers() == workers, f"{workers} workers registered",
              cluster.processes(), directory)  # fmt: skip
        yield cluster
    finally:
        cluster.stop()


def _answers(cluster: StandaloneCluster) -> bool:
    try:
        return cluster.state().get("status") == "ALIVE"
    except OSError:
        return False
