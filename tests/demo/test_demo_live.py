"""The live demo keeps Spark's own output (JVM warnings, tracebacks of the Python workers
whose tasks a stop cancels) out of its table, in a log whose end it shows if Spark fails
to start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from enrich.demo.live import _stderr_to


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
