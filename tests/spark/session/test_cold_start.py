"""A cold query's first seconds (issue 43): what the driver-side planner processes import.

Spark starts a Python process for each kind of Python data source call on the driver
(``create_data_source``, ``plan_data_source_read``, ``write_into_data_source``, the
streaming source's and sink's runners), one after another before a cold query's first
row; each imports the source's or the sink's module, so what those modules import at
the top is paid several times over.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(done.stdout.split())


SOURCE, SINK = "enrich.spark.streams.stream_source", "enrich.spark.sink.redis.data_source"


@pytest.mark.parametrize(
    ("runner", "module"),
    [
        ("pyspark.sql.worker.create_data_source", SOURCE),
        ("pyspark.sql.worker.plan_data_source_read", SOURCE),
        ("pyspark.sql.streaming.python_streaming_source_runner", SOURCE),
        ("pyspark.sql.worker.write_into_data_source", SINK),
        ("pyspark.sql.worker.python_streaming_sink_runner", SINK),
    ],
)
def test_a_planner_process_imports_no_pandas(runner: str, module: str) -> None:
    # A planner unpickles the data source (importing its module) and calls schema(),
    # streamReader() or streamWriter(): none needs pandas, which cost 0.25-0.45 s a
    # process (2026-11-28, load ~2) when enrich.spi's bulk decoder built an Arrow scalar
    # at import (pyarrow's first pa.scalar imports pandas). The source's planners need
    # no pyarrow.compute or pyarrow.json either (40-65 ms); the sink's module imports
    # pyarrow.compute itself.
    loaded = _modules_after(f"import {runner}\nimport {module}")
    assert module in loaded
    assert "pandas" not in loaded
    if module == SOURCE:
        assert not {"pyarrow.compute", "pyarrow.json"} & loaded
