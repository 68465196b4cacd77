"""Spark's Python processes forked from ``enrich.spark.session.forkserver``: a launcher
runs a module in a child of the server that has its streams, directory, environment and
arguments, exits as the child does, passes signals on, takes its child along when it is
killed, and runs Python itself for what cannot be forked; in a local Spark the driver's
planners and the executors' workers come from the server.

Real processes throughout: a server started as ``session()`` starts it, launchers run as
Spark runs them (an executable given ``-m MODULE``)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import enrich.spark
from tests.support.spark_version import requires_spark

if TYPE_CHECKING:
    from enrich.spark.session.forkserver import ForkServer

# ``enrich.spark.session`` is the package's function: resolved before the submodule is
# imported (importing the package directly first would bind the module over the name).
assert callable(enrich.spark.session)
forkserver = importlib.import_module("enrich.spark.session.forkserver")

pytestmark = [pytest.mark.timeout(120)]

WAIT = 60.0  # seconds an awaited event may take on a loaded machine

# A module a launcher runs: what its process sees, as one JSON line.
REPORT = """
import json, os, sys
from enrich.spark.session import forkserver
print(json.dumps({"forked": forkserver.FORKED, "pid": os.getpid(), "argv": sys.argv[1:],
                  "cwd": os.getcwd(), "answer": os.environ.get("ENRICH_TEST_ANSWER"),
                  "stdin": sys.stdin.read(), "path0": sys.path[0]}), flush=True)
sys.exit(int(os.environ.get("ENRICH_TEST_EXIT", "0")))
"""

# A module that says its pid, then waits to be signalled.
SLEEPER = """
import os, sys, time
print(os.getpid(), flush=True)
time.sleep(600)
"""


def _await(done: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"still waiting: {what}"
        time.sleep(0.02)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.fixture
def modules(tmp_path: Path) -> Path:
    (tmp_path / "report_me.py").write_text(REPORT)
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    return tmp_path


@pytest.fixture
def server() -> Iterator[ForkServer]:
    started = forkserver.start()
    assert started is not None
    socket_file = started.folder / "s"
    _await(socket_file.exists, "the server to listen")
    yield started
    started.stop()
    started.process.wait(timeout=WAIT)


def _env(**extra: str) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[3])
    # What Spark gives its Python processes: a fixed hash seed, the repository importable.
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": root, **extra}


def _run(server: ForkServer, where: Path, *args: str, stdin: str = "",
         **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:  # fmt: skip
    done = subprocess.run([server.launcher, *args], cwd=where, env=_env(**env), input=stdin,
                          capture_output=True, text=True, timeout=WAIT)  # fmt: skip
    lines = done.stdout.strip().splitlines()
    return done, (json.loads(lines[-1]) if lines else {})


def test_a_module_runs_forked_with_the_launchers_streams_place_and_arguments(
    server: ForkServer, modules: Path
) -> None:
    done, seen = _run(server, modules, "-m", "report_me", "a", "b", stdin="the input",
                      ENRICH_TEST_ANSWER="42")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert seen["forked"] is True
    assert seen["argv"] == ["a", "b"]
    assert seen["cwd"] == str(modules) and seen["path0"] == str(modules)
    assert seen["answer"] == "42"
    assert seen["stdin"] == "the input"


def test_the_childs_exit_status_is_the_launchers(server: ForkServer, modules: Path) -> None:
    done, seen = _run(server, modules, "-m", "report_me", ENRICH_TEST_EXIT="3")
    assert seen["forked"] is True and done.returncode == 3
    done, _ = _run(server, modules, "-m", "no_such_module_here")
    assert done.returncode == 1 and "no_such_module_here" in done.stderr


@contextlib.contextmanager
def _sleeping(server: ForkServer, modules: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A launcher running the sleeper, and the sleeper's pid."""
    with subprocess.Popen([server.launcher, "-m", "sleeper"], cwd=modules, env=_env(),
                          stdout=subprocess.PIPE, text=True) as launcher:  # fmt: skip
        assert launcher.stdout is not None
        child = int(launcher.stdout.readline())
        try:
            yield launcher, child
        finally:
            if launcher.poll() is None:
                launcher.kill()


def test_a_signal_to_the_launcher_reaches_the_child_and_ends_both(
    server: ForkServer, modules: Path
) -> None:
    with _sleeping(server, modules) as (launcher, child):
        assert child != launcher.pid  # forked by the server, not the launcher's own process
        launcher.terminate()  # what Spark's destroy() sends
        assert launcher.wait(timeout=WAIT) == -signal.SIGTERM  # died of it, as the child
    _await(lambda: _gone(child), "the child to end")


def test_a_ctrl_c_to_the_launchers_group_reaches_the_child_as_it_would_python(
    server: ForkServer, modules: Path
) -> None:
    # A terminal sends Ctrl-C to its foreground process group: Spark's JVM and the
    # processes it started. The child joins its launcher's group, so it gets the signal
    # as the interpreter would have (and a daemon that left for a group of its own, as
    # pyspark's does, does not); the launcher itself waits for the child's end.
    with subprocess.Popen([server.launcher, "-m", "sleeper"], cwd=modules, env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          process_group=0) as launcher:  # fmt: skip
        assert launcher.stdout is not None
        child = int(launcher.stdout.readline())
        assert os.getpgid(child) == launcher.pid  # the launcher leads its own group
        os.killpg(launcher.pid, signal.SIGINT)
        assert launcher.wait(timeout=WAIT) == -signal.SIGINT
        assert launcher.stderr is not None
        assert "KeyboardInterrupt" in launcher.stderr.read()
    _await(lambda: _gone(child), "the child to end")
    assert server.running()  # not in that group


def test_a_launcher_killed_takes_its_child_along(server: ForkServer, modules: Path) -> None:
    with _sleeping(server, modules) as (launcher, child):
        launcher.kill()  # no chance to pass anything on: the server sees its socket close
        launcher.wait(timeout=WAIT)
    _await(lambda: _gone(child), "the child to end")


def test_what_cannot_be_forked_runs_as_its_own_interpreter(
    server: ForkServer, modules: Path
) -> None:
    # Not `-m MODULE`: the launcher execs Python in its own process (same pid).
    with subprocess.Popen([server.launcher, "-c", "import os; print(os.getpid())"],
                          env=_env(), stdout=subprocess.PIPE, text=True) as launcher:  # fmt: skip
        out, _ = launcher.communicate(timeout=WAIT)
    assert int(out) == launcher.pid
    # A hash seed other than the server's is fixed at an interpreter's start: not forked.
    done, seen = _run(server, modules, "-m", "report_me", PYTHONHASHSEED="7")
    assert done.returncode == 0 and seen["forked"] is False


def test_a_launcher_whose_directory_is_gone_runs_python_itself(
    server: ForkServer, modules: Path, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    paths = os.pathsep.join([str(modules), str(Path(__file__).resolve().parents[3])])
    (modules / "pid_me.py").write_text("import os\nprint(os.getpid())\n")
    command = f"cd {gone} && rmdir {gone} && exec {server.launcher} -m pid_me"
    with subprocess.Popen(["/bin/sh", "-c", command], env=_env(PYTHONPATH=paths),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as shell:  # fmt: skip
        out, err = shell.communicate(timeout=WAIT)
    assert shell.returncode == 0, err
    assert int(out) == shell.pid  # the shell exec'd the launcher, which exec'd Python


def test_the_server_ends_after_its_driver_and_its_children(
    server: ForkServer, modules: Path
) -> None:
    with _sleeping(server, modules) as (launcher, _):
        server.stop()  # the driver's end of the pipe closes (as when the driver exits)
        _await(lambda: not (server.folder / "s").exists(), "the server to stop listening")
        assert server.running()  # its child still runs, and still answers to its launcher
        done, seen = _run(server, modules, "-m", "report_me")  # a launcher runs Python
        assert done.returncode == 0 and seen["forked"] is False
        launcher.terminate()
        assert launcher.wait(timeout=WAIT) == -signal.SIGTERM
    assert server.process.wait(timeout=WAIT) == 0
    assert not server.folder.exists()


# -- in a local Spark ----------------------------------------------------------------------


def _forked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    forked = sys.modules[forkserver.__name__].FORKED  # preloaded in a forked worker
    for batch in batches:
        yield pa.RecordBatch.from_pydict({"forked": [forked] * batch.num_rows})


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_executors_workers_come_from_the_fork_server(spark: SparkSession) -> None:
    assert Path(spark.sparkContext.pythonExec).name == "python"
    assert Path(spark.sparkContext.pythonExec).parent.name.startswith("enrich-fork-")
    rows = spark.range(0, 10, 1, 2).mapInArrow(_forked, "forked boolean").collect()
    assert [r.forked for r in rows] == [True] * 10


@pytest.mark.spark
@pytest.mark.timeout(300)
@requires_spark(4, 1, "Python data sources and their driver-side planners")
def test_a_data_sources_driver_side_planner_comes_from_the_fork_server(
    spark: SparkSession,
) -> None:
    from tests.spark.session.forked_source import ForkedSource

    spark.dataSource.register(ForkedSource)
    row = spark.read.format("enrich_test_forked").load().collect()[0]
    assert (row.planned_forked, row.read_forked, row.warm) == (True, True, True)
