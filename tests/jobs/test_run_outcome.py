"""`enrich run` ends in one line: a failed query's cause, or the failed rows' count.

Run as users run it (a subprocess), on local Spark, against stores that are down: a
closed port nobody listens on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from enrich.demo.local import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
ORDERS = ROOT / "examples/data/orders"
ORDER_LINES = (ORDERS / "orders-0001.json").read_text().splitlines()
ROWS = len(ORDER_LINES)
KEYED = sum(json.loads(line)["user_id"] is not None for line in ORDER_LINES)  # looked up


def job(tmp_path: Path, store: str, join: str, extra: str = "") -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        f"""
name: down
source: {{format: files, path: "{ORDERS}", schema: "order_id long, user_id long"}}
stores: {{dim: {store}}}
joins: [{join}]
sink: {{format: noop}}
checkpoint: "{tmp_path / "checkpoint"}"
{extra}
"""
    )
    return path


def enrich_run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    return subprocess.run(
        [sys.executable, "-m", "enrich.cli", "run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )


def test_a_failed_query_ends_in_its_cause_with_the_trace_in_the_log(tmp_path: Path) -> None:
    port = free_port()
    store = f'{{kind: http, url_template: "http://127.0.0.1:{port}/u/{{}}", schema: "a int"}}'
    log = tmp_path / "run.log"
    done = enrich_run(
        str(job(tmp_path, store, "{store: dim, on: user_id, on_error: fail}")),
        "--no-preflight",
        "--log-file",
        str(log),
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(
        f"error: SourceUnavailable: GET http://127.0.0.1:{port}/u/{{}} for key "
    ), done.stderr
    assert "cannot connect" in lines[-1]
    assert lines[-2] == f"the full trace is in {log}"
    assert "Traceback" not in done.stderr and "\tat org.apache" not in done.stderr
    assert len(lines) < 10, done.stderr
    trace = log.read_text()
    assert "Traceback (most recent call last)" in trace and "StreamingQueryException" in trace


def test_rows_failed_are_counted_and_past_max_error_ratio_the_job_fails(
    tmp_path: Path,
) -> None:
    store = (
        f'{{kind: redis, url: "redis://127.0.0.1:{free_port()}/0", key_template: "u:{{}}", '
        'value: json, schema: "a int", timeout: 1}'
    )
    join = "{store: dim, on: user_id, on_error: dead_letter, name: users}"
    dead_letter = f'dead_letter: {{format: files, file_format: json, path: "{tmp_path}/dl"}}'
    path = job(tmp_path, store, join, f"{dead_letter}\nmax_error_ratio: 0.5")
    log = tmp_path / "run.log"
    done = enrich_run(str(path), "--no-preflight", "--log-file", str(log))
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == (
        f"error: join 'users': {KEYED} of {ROWS} rows failed their lookups "
        f"({KEYED / ROWS:.1%}), more than max_error_ratio 0.5"
    ), done.stderr
    assert lines[-2].endswith(
        f"rows failed their lookups: users (on_error dead_letter): {KEYED} of {ROWS} rows "
        f"(connection={KEYED})"
    ), done.stderr
    # the summary comes after the last micro-batch's line, and the policy is named as
    # the config named it
    summary = next(i for i, line in enumerate(lines) if "enrich.jobs: users: rows" in line)
    batches = [i for i, line in enumerate(lines) if " batch " in line and ": users: " in line]
    assert batches and batches[-1] < summary, done.stderr
    # Spark's output (and its Python workers' log lines) went to the log file: a few
    # failed-row warnings there, none naming a policy the config did not name
    spark_log = log.read_text()
    assert 0 < spark_log.count("lookup of row") <= 5
    assert "policy error_column" not in spark_log


def test_a_join_on_a_column_the_source_lacks_is_a_config_error(spark: Any) -> None:
    from jobs import _config, enrich_job

    config = _config.parse(
        {
            "source": {"format": "rate", "select": ["value AS order_id"]},
            "stores": {
                "dim": {
                    "kind": "http",
                    "url_template": "http://127.0.0.1:9/u/{}",
                    "schema": "a int",
                }
            },
            "joins": [{"store": "dim", "on": "user_id"}],
        }
    )
    with pytest.raises(_config.ConfigError, match=r"^joins\[0\]: .*user_id.*order_id"):
        enrich_job.run(spark, config)
