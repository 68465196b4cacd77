"""A micro-batch that fails after ``--duration`` ran out fails the job (exit 1, its cause).

The known bug: ``enrich run --duration 20`` with a wrong sink password printed ``rows
0->0`` and exited 0: the batch failed inside the duration, the query spent seconds
aborting, the duration ran out meanwhile and the failure was lost. Here no clock decides
the order: the lookup service holds every answer until the test has seen the job's
``--duration ... over`` line, then lets the batch go on to fail.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jobs import _config, _outcome, _streams, enrich_job
from tests.support.redis_fixtures import secured_redis

__all__ = ("secured_redis",)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
ORDERS = ROOT / "examples/data/orders"
WAIT = 240.0  # seconds: a hang guard, never a sync


class HeldService:
    """An HTTP dimension service whose answers wait until the test lets them go.

    ``arrived`` is set by the first request; each answers ``status`` once ``go`` is set.
    """

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.go = threading.Event()
        self.status = 200
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.arrived.set()
                owner.go.wait(WAIT)
                body = b'{"a": 1}' if owner.status == 200 else b"unavailable"
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def store(self) -> dict[str, Any]:
        port = self.server.server_address[1]
        return {
            "kind": "http",
            "url_template": f"http://127.0.0.1:{port}/u/{{}}",
            "schema": "a int",
            "timeout": 600,  # only the test ends a held answer
        }

    def close(self) -> None:
        self.go.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def held() -> Iterator[HeldService]:
    service = HeldService()
    yield service
    service.close()


def job(store: dict[str, Any], sink: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Orders streamed from files (the first micro-batch has rows: every batch that
    reaches the sink has looked its keys up first), until --duration or a failure."""
    return {
        "name": "late-failure",
        "source": {"format": "files", "path": str(ORDERS), "schema": "order_id long, user_id long"},
        "stores": {"dim": store},
        "joins": [{"store": "dim", "on": "user_id", "on_error": "fail", "timeout": 600}],
        "sink": sink,
        "checkpoint": str(tmp_path / "checkpoint"),
        "trigger": "1 second",  # not availableNow: only --duration stops it
    }


class LineSeen(logging.Handler):
    def __init__(self, text: str) -> None:
        super().__init__(logging.INFO)
        self.text, self.seen = text, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


def test_a_batch_failing_after_the_duration_ran_out_is_raised(
    spark: Any, held: HeldService, tmp_path: Path
) -> None:
    config = _config.parse(job(held.store(), {"format": "noop"}, tmp_path))
    df, _ = enrich_job.enrich(spark, config, _streams.read(spark, config.source))
    query = _streams.start(df, config)
    logger = logging.getLogger("enrich.jobs")
    over, level = LineSeen("--duration 0.01s over"), logger.level
    logger.addHandler(over)
    logger.setLevel(logging.INFO)
    outcome: dict[str, BaseException] = {}

    def wait() -> None:
        try:
            _streams.await_query(query, 0.01)
        except BaseException as exc:
            outcome["failure"] = exc

    waiter = threading.Thread(target=wait)
    try:
        assert held.arrived.wait(WAIT), "no lookup reached the service"
        waiter.start()  # the duration runs out while the batch's lookups are held
        assert over.seen.wait(WAIT), "the job never said its duration was over"
        held.status = 503
        held.go.set()  # the batch in progress now fails
        waiter.join(WAIT)
    finally:
        logger.removeHandler(over)
        logger.setLevel(level)
        if query.isActive:
            query.stop()
    assert not waiter.is_alive()
    cause = _outcome.root_cause(outcome["failure"])
    assert "503" in cause and f"127.0.0.1:{held.server.server_address[1]}" in cause, cause


def test_enrich_run_exits_1_when_the_sink_fails_after_the_duration_ran_out(
    held: HeldService, secured_redis: Any, tmp_path: Path
) -> None:
    import yaml

    url = f"redis://:wrong-password@127.0.0.1:{secured_redis.port}/0"
    sink = {"format": "redis", "options": {"url": url, "stream": "enriched"}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job(held.store(), sink, tmp_path)))
    log = tmp_path / "run.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    argv = ["run", str(path), "--no-preflight", "--duration", "30", "--log-file", str(log)]
    with subprocess.Popen(
        [sys.executable, "-m", "enrich.cli", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as run:
        assert run.stderr is not None
        lines: list[str] = []
        over = threading.Event()

        def read() -> None:
            assert run.stderr is not None
            for line in run.stderr:
                lines.append(line.rstrip("\n"))
                if "--duration 30s over" in line:
                    over.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def seen(event: threading.Event) -> bool:
            # awaits the event; polls only to give up early if the job ended without it
            while not event.wait(0.5):
                if run.poll() is not None:
                    return event.is_set()
            return True

        try:
            # The first trigger starts well within the 30 s (it took 10-15 s at a load
            # average of 20 on 2 cores); from then on its lookups are held, whatever the
            # machine's load, until both events are seen.
            assert seen(held.arrived), lines
            assert seen(over), lines
            held.go.set()  # the rows reach the sink, whose password is wrong
            code = run.wait(WAIT)
        finally:
            if run.poll() is None:
                run.kill()
        reader.join(WAIT)
    assert code == 1, "\n".join(lines)
    assert lines[-2] == f"the full trace is in {log}", lines
    assert lines[-1] == (
        "error: redis.exceptions.AuthenticationError: invalid username-password pair or user "
        "is disabled."
    ), lines
    assert not any("rows 0->0" in line for line in lines), lines
