"""A real Prometheus for the tests: Debian's binary, started on a free loopback port.

:func:`start_prometheus` writes a scrape config naming the targets, starts the binary
with a temporary data folder, and waits until it answers ``/-/ready``; :meth:`query`
asks its HTTP API (``/api/v1/query``). No service: the process is the test's own and
:meth:`Prometheus.stop` ends it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from enrich.demo.local import free_port

STARTUP_TIMEOUT = 60.0  # seconds until /-/ready answers, on a loaded machine


class PrometheusUnavailable(RuntimeError):
    """No prometheus binary here, or it did not start."""


def prometheus_binary() -> str:
    """``$ENRICH_PROMETHEUS``, else ``prometheus`` on PATH (Debian: /usr/bin)."""
    found = os.environ.get("ENRICH_PROMETHEUS") or shutil.which("prometheus")
    if not found:
        raise PrometheusUnavailable(
            "no prometheus binary (apt-get install prometheus, or set ENRICH_PROMETHEUS)"
        )
    return found


@dataclass
class Prometheus:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (``[{"metric": {...}, "value": [t, "v"]}]``)."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(address, timeout=30) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def start_prometheus(folder: Path, targets: list[str], interval: str = "500ms") -> Prometheus:
    """Prometheus scraping ``targets`` (``host:port``) every ``interval``, job ``enrich``."""
    binary = prometheus_binary()
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    config.write_text(
        json.dumps(  # YAML is a superset of JSON
            {
                "global": {"scrape_interval": interval, "scrape_timeout": interval},
                "scrape_configs": [
                    {"job_name": "enrich", "static_configs": [{"targets": targets}]}
                ],
            }
        )
    )
    port = free_port()
    log = folder / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(process, port, log)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PrometheusUnavailable(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as answer:
                if answer.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.2)  # polling a process's start-up, with the deadline as hang guard
    server.stop()
    raise PrometheusUnavailable(f"prometheus was not ready in {STARTUP_TIMEOUT:.0f} s")
