"""The live demo keeps Spark's own output (JVM warnings, tracebacks of the Python workers
whose tasks a stop cancels) out of its table, in a log whose end it shows if Spark fails
to start; its streaming part says what it waits for and ends with totals that agree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from enrich.demo.streaming.live import _stderr_to

ROOT = Path(__file__).resolve().parents[2]


def test_what_spark_writes_while_starting_goes_to_the_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "spark.log"
    with _stderr_to(log):
        os.write(2, b"WARN NativeCodeLoader: Unable to load native-hadoop library\n")
    os.write(2, b"the demo's own line\n")
    assert capfd.readouterr().err == "the demo's own line\n"
    assert "NativeCodeLoader" in log.read_text()


def test_a_failed_start_shows_the_end_of_the_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "spark.log"
    with pytest.raises(RuntimeError, match="no gateway"), _stderr_to(log):
        os.write(2, b"Error: JAVA_HOME is not set and no 'java' command could be found\n")
        raise RuntimeError("no gateway")
    err = capfd.readouterr().err
    assert f"Spark did not start; the end of {log}:" in err
    assert "JAVA_HOME is not set" in err
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def java_missing() -> bool:
    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")


TOTALS = re.compile(
    r"^\s+totals: rows in ([\d,]+) = enriched ([\d,]+) \+ misses ([\d,]+) "
    r"\+ dead letters ([\d,]+) \((\d+) micro-batch(?:es)?\)$",
    re.M,
)


def number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(java_missing(), reason="the Spark part needs Java")
def test_the_streaming_part_says_what_it_waits_for_and_ends_with_totals_that_agree() -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "enrich.cli", "demo", "--duration", "3", "--records", "500",
         "--rows-per-second", "200"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=560, check=False,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
    part3 = out[out.index("3. Spark Structured Streaming") :]
    # The steps that block say what they wait for, and when they are over.
    for line in (
        "waiting for Spark to start (local[2]) ...",
        "waiting for the query to start (Spark plans it and starts its source) ...",
    ):
        assert f"   {line}\n" in part3, part3
    assert re.search(r"^   Spark started \(\d+ s\)$", part3, re.M), part3
    assert re.search(r"^   query started \(\d+ s\)$", part3, re.M), part3
    # Live lines: what the query waits for until rows are shown, never a bare 0 rows.
    live = [line for line in part3.splitlines() if line.startswith("   elapsed ")]
    showing = [i for i, line in enumerate(live) if "(rows shown " in line]
    assert showing, part3
    for line in live[: showing[0]]:
        assert re.match(r"   elapsed \d+ s  waiting for \S", line), line
    for line in live[showing[0] :]:
        assert re.search(r"  rows [1-9][\d,]*  rows/s ", line), line
    assert "rows shown 3 of 3 s" in live[-1], live[-1]
    # The totals: rows in (the query's progress) = the sink's cases, over > 0 rows.
    found = TOTALS.findall(part3)
    assert len(found) == 1, part3
    rows_in, enriched, misses, dead_letters, batches = map(number, found[0])
    assert rows_in > 0 and int(batches) > 0
    assert rows_in == enriched + misses + dead_letters
    assert enriched > 0 and misses > 0 and dead_letters > 0  # every case of the orders
    for label in ("hit", "miss: no such user", "null key: no lookup", "error policy: bad value"):
        assert re.search(rf"^\s+{re.escape(label)}\s+\{{'order_id'", part3, re.M), label
    assert "Traceback" not in out + done.stderr, (out + done.stderr)[-4000:]
