"""A real Prometheus scrapes a running streaming job (`enrich run --metrics-port`).

The job reads a Redis stream, joins a Redis dimension in which some values are not
JSON (their rows go to the dead letter), and writes Parquet. The test starts Debian's
Prometheus on a free loopback port with a scrape config naming the job's port, then
asks Prometheus's HTTP API until the counters show every entry, and compares them with
what the sink and the dead letter hold. It waits for conditions, never for a time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.dataset as ds
import pytest

from enrich.demo.local import free_port
from tests.support.prometheus_server import (
    Prometheus,
    PrometheusUnavailable,
    prometheus_binary,
    start_prometheus,
)

pytest.importorskip("prometheus_client", reason="needs the metrics extra")
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = 400
USERS = 40
BAD = {3, 17, 29}  # users whose value is not JSON: their rows are dead letters
WAIT = 300.0  # seconds a condition may take on a loaded machine (the hang guard)
DASHBOARD = ROOT / "deploy/grafana/spark-enrich.json"

T = TypeVar("T")


def until(what: str, probe: Callable[[], T | None], process: subprocess.Popen[str]) -> T:
    """``probe()``'s first answer that is not None, asked again until then; fails at
    the hang guard or when the job exits first."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        if process.poll() is not None:
            raise AssertionError(f"the job exited ({process.returncode}) before {what}")
        time.sleep(0.5)  # between two polls of Prometheus's API
    raise AssertionError(f"no {what} within {WAIT:.0f} s")


def total(prometheus: Prometheus, expr: str) -> float | None:
    result = prometheus.query(expr)
    return float(result[0]["value"][1]) if result else None


def rows_in(folder: Path, fmt: str) -> int:
    if not folder.exists():
        return 0
    return int(ds.dataset(folder, format=fmt).count_rows())


@pytest.fixture
def prometheus_binary_here() -> str:
    try:
        return prometheus_binary()
    except PrometheusUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def job(tmp_path: Path, redis_server: Any, redis_client: Any) -> Path:
    for user in range(USERS):
        value = "not json" if user in BAD else json.dumps({"name": f"user {user}"})
        redis_client.set(f"user:{user}", value)
    for order in range(ENTRIES):
        redis_client.xadd("orders", {"order_id": order, "user_id": order % USERS})
    config = {
        "name": "prom-orders",
        "source": {
            "format": "redis-stream",
            "options": {"url": redis_server.url, "stream": "orders"},
            "schema": "stream_id string, order_id long, user_id long",
        },
        "stores": {
            "users": {
                "kind": "redis",
                "url": redis_server.url,
                "key_template": "user:{}",
                "value": "json",
                "schema": "name string",
            }
        },
        "joins": [
            {
                "store": "users",
                "on": "user_id",
                "how": "left",
                "name": "users",
                "on_error": "dead_letter",
                "cache": {"max_rows": 1000, "ttl": 60},
            }
        ],
        "sink": {"format": "files", "file_format": "parquet", "path": str(tmp_path / "out")},
        "dead_letter": {"format": "files", "file_format": "json", "path": str(tmp_path / "dead")},
        "checkpoint": str(tmp_path / "checkpoint"),
        "trigger": "1 second",
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def running(job: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    args = ["run", str(job), "--no-preflight", "--metrics-port", str(port)]
    with (tmp_path / "job.out").open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "enrich.cli", *args, "--log-file", str(tmp_path / "job.log")],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        yield process, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # the job's own stop: Ctrl-C
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def test_prometheus_scrapes_the_job_and_its_counts_match_the_sink(
    prometheus_binary_here: str, running: tuple[subprocess.Popen[str], int], tmp_path: Path
) -> None:
    process, port = running
    prometheus = start_prometheus(tmp_path / "prometheus", [f"127.0.0.1:{port}"])
    try:
        stage = '{job="enrich",stage="users",store="redis"}'
        until(
            "every entry counted",
            lambda: total(prometheus, f"sum(enrich_rows_in_total{stage}) == {ENTRIES}"),
            process,
        )
        dead = ENTRIES // USERS * len(BAD)
        written = until(
            "the sink's rows counted",
            lambda: (
                rows_in(tmp_path / "out", "parquet")
                if rows_in(tmp_path / "out", "parquet") == ENTRIES - dead
                and rows_in(tmp_path / "dead", "json") == dead
                else None
            ),
            process,
        )
        rows_out = total(prometheus, f"sum(enrich_rows_out_total{stage})")
        errors = total(prometheus, f"sum(enrich_errors_total{stage})")
        hits = total(prometheus, f"sum(enrich_hits_total{stage})")
        misses = total(prometheus, f"sum(enrich_misses_total{stage})")
        assert errors == rows_in(tmp_path / "dead", "json") == dead
        assert rows_out is not None and rows_out - errors == written == ENTRIES - dead
        assert hits is not None and misses is not None and hits + misses == written
        # The latency histogram: buckets, a count, and quantiles Prometheus computes.
        buckets = prometheus.query(f"enrich_request_duration_seconds_bucket{stage}")
        assert len(buckets) > 10 and any(b["metric"]["le"] == "+Inf" for b in buckets)
        requests = total(prometheus, f"sum(enrich_request_duration_seconds_count{stage})")
        assert requests == total(prometheus, f"sum(enrich_requests_total{stage})") > 0
        buckets_rate = f"sum by (le) (enrich_request_duration_seconds_bucket{stage})"
        p99 = total(prometheus, f"histogram_quantile(0.99, {buckets_rate})")
        assert p99 is not None and 0 < p99 < 30
        # The query's progress: its rows read, and the stream's lag once all is read.
        until(
            "the query's rows read",
            lambda: total(prometheus, f"sum(enrich_query_input_rows_total) == {ENTRIES}"),
            process,
        )
        lag = until(
            "the source's lag", lambda: total(prometheus, "enrich_source_lag_records"), process
        )
        assert lag == 0
        # The stage is labelled with its query, as the query's own series are.
        queries = {r["metric"]["query"] for r in prometheus.query("enrich_query_input_rows_total")}
        staged = {r["metric"]["query"] for r in prometheus.query(f"enrich_rows_in_total{stage}")}
        assert staged == queries and "" not in queries
        check_dashboard(prometheus, port)
    finally:
        prometheus.stop()


def check_dashboard(prometheus: Prometheus, port: int) -> None:
    """Every query of the dashboard names metrics the job exports, and Prometheus
    evaluates it."""
    from tests.deploy.dashboard import dashboard_queries, metric_names, scrape_names

    exported = scrape_names(f"http://127.0.0.1:{port}/metrics")
    for expr in dashboard_queries(json.loads(DASHBOARD.read_text())):
        names = metric_names(expr)
        assert names and names <= exported, (expr, names - exported)
        prometheus.query(expr.replace("$__rate_interval", "10s").replace("$query", ".*"))
