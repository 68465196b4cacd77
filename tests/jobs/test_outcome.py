"""How a job ends, without Spark: the root cause of a failure, the failed-rows lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from enrich import JoinMetrics, LookupFailed, SourceUnavailable
from jobs import _outcome

# The text of the StreamingQueryException that ended a job whose HTTP store's port was
# closed (on_error=fail), as Spark 4.3 wrapped the Python worker's traceback (trimmed).
STREAM_FAILED = """\
[STREAM_FAILED] Query [id = 48223f09, runId = 6e2aa4b9] terminated with exception: \
[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most \
recent call last):
  File "/work/enrich/spark/arrow.py", line 207, in enrich_batches
    plan.report(run)
  File "/work/connectors/http/request.py", line 90, in send
    raise transport_error(exc, target=target, key=key) from exc
enrich._errors.SourceUnavailable: GET http://127.0.0.1:1/users/{} for key 0: cannot \
connect (Connect call failed ('127.0.0.1', 1))
 SQLSTATE: 38000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: [id = 48223f09, runId = 6e2aa4b9]
Current Committed Offsets: {}
"""
WORKER_ERROR = """\
[STREAM_FAILED] Query [id = 1] terminated with exception: [PYTHON_EXCEPTION] An \
exception was thrown from the Python worker: Traceback (most recent call last):
  File "/x.py", line 1, in f
    return int(x)
ValueError: invalid literal for int() with base 10: 'a'
 SQLSTATE: 38000
=== Streaming Query ===
"""


class StreamingQueryException(Exception):
    """Stands in for pyspark's: what matters is its text, where Py4J put the cause."""


def test_the_library_error_is_dug_out_of_spark_s_text() -> None:
    cause = _outcome.root_cause(StreamingQueryException(STREAM_FAILED))
    assert cause == (
        "SourceUnavailable: GET http://127.0.0.1:1/users/{} for key 0: cannot connect "
        "(Connect call failed ('127.0.0.1', 1))"
    )


def test_a_driver_side_chain_gives_its_innermost_library_error() -> None:
    try:
        try:
            raise ConnectionRefusedError("refused")
        except ConnectionRefusedError as exc:
            raise SourceUnavailable("redis at h:1 is unreachable", key=7) from exc
    except SourceUnavailable as exc:
        outer = RuntimeError("task failed")
        outer.__cause__ = exc
    assert _outcome.root_cause(outer).startswith("SourceUnavailable: redis at h:1")


def test_a_python_error_in_a_worker_is_its_traceback_s_last_line() -> None:
    cause = _outcome.root_cause(StreamingQueryException(WORKER_ERROR))
    assert cause == "ValueError: invalid literal for int() with base 10: 'a'"


def test_a_cause_pyspark_keeps_behind_spark_s_own_message_is_found() -> None:
    # A sink's task failed: the query's message is Spark's "Writing job failed.", the
    # worker's traceback is in the JVM-side cause pyspark converts and keeps as _cause.
    outer = StreamingQueryException("Writing job failed.\n=== Streaming Query ===")
    outer._cause = StreamingQueryException(  # type: ignore[attr-defined]
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback "
        "(most recent call last):\n"
        '  File "/work/enrich/spark/redis_sink.py", line 146, in _write\n'
        "    raise response\n"
        "redis.exceptions.AuthenticationError: invalid username-password pair or user is "
        "disabled.\n SQLSTATE: 38000"
    )
    assert _outcome.root_cause(outer) == (
        "redis.exceptions.AuthenticationError: invalid username-password pair or user is disabled."
    )


def test_anything_else_is_its_first_line_and_never_long() -> None:
    exc = StreamingQueryException("[STREAMING_OUTPUT_MODE.INVALID] bad: x\n  at org.Foo")
    assert _outcome.root_cause(exc) == (
        "StreamingQueryException: [STREAMING_OUTPUT_MODE.INVALID] bad: x"
    )
    assert len(_outcome.root_cause(LookupFailed("x" * 5000))) <= 500


def test_report_writes_the_trace_and_ends_with_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "job.log"
    try:
        raise StreamingQueryException(STREAM_FAILED)
    except StreamingQueryException as exc:
        assert _outcome.report(exc, log) == _outcome.EXIT_FAILED
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"the full trace is in {log}",
        "error: SourceUnavailable: GET http://127.0.0.1:1/users/{} for key 0: cannot "
        "connect (Connect call failed ('127.0.0.1', 1))",
    ]
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "=== Streaming Query ===" in text


def metrics(rows: int, **errors: int) -> JoinMetrics:
    m = JoinMetrics(rows_in=rows)
    m.errors.update(errors)
    return m


def test_failed_rows_are_counted_by_join_and_reason() -> None:
    totals = {"users": metrics(950, unavailable=800, timeout=55), "credit": metrics(950)}
    assert _outcome.failed_rows(totals, {"users": "dead_letter"}) == (
        "rows failed their lookups: users (on_error dead_letter): 855 of 950 rows "
        "(timeout=55, unavailable=800)"
    )
    assert _outcome.failed_rows({"credit": metrics(950)}) is None


def test_max_error_ratio_names_the_join_past_it() -> None:
    totals = {"credit": metrics(100, timeout=1), "users": metrics(950, unavailable=855)}
    assert _outcome.over_ratio(totals, None) is None
    assert _outcome.over_ratio(totals, 0.95) is None
    line = _outcome.over_ratio(totals, 0.05)
    assert line == (
        "join 'users': 855 of 950 rows failed their lookups (90.0%), more than max_error_ratio 0.05"
    )
    assert _outcome.over_ratio({"credit": metrics(100, timeout=1)}, 0) is not None


def test_the_log_file_is_named_after_the_job(tmp_path: Path) -> None:
    path = _outcome.log_path("my job/1")
    assert path.name.startswith("enrich-my-job-1-") and path.suffix == ".log"
    assert _outcome.log_path("x", str(tmp_path / "a.log")) == tmp_path / "a.log"
