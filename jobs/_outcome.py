"""How a job ends: one line saying why it failed, or how many rows failed, never a trace.

A failed query surfaces in the driver as a Py4J-converted ``StreamingQueryException``
whose text holds the JVM's stack and, inside it, the Python worker's traceback. The
useful line is the first error of this library in that chain (``SourceUnavailable: GET
http://... for key 7: cannot connect``): :func:`root_cause` digs it out, from the
exception chain when the error was raised on the driver, from the text when it crossed
the JVM. :func:`report` writes the whole trace to the job's log file and prints the
file's name, then the root cause as the last line.

A run whose rows failed their lookups (``on_error`` other than ``fail``) ends with
:func:`failed_rows`' warning, counts by reason; past the config's ``max_error_ratio``
the job exits with :data:`EXIT_TOO_MANY_ERRORS`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import enrich

EXIT_FAILED = 1  # the query (or its start) failed
EXIT_BAD_CONFIG = 2
EXIT_TOO_MANY_ERRORS = 3  # a join's failed rows passed max_error_ratio
_LONGEST = 500  # characters of a cause line at most


def _project_errors() -> tuple[str, ...]:
    """The names of every error class of the library (EnrichError and its subclasses)."""
    seen: list[str] = []
    todo: list[type] = [enrich.EnrichError]
    while todo:
        cls = todo.pop()
        if cls.__name__ not in seen:
            seen.append(cls.__name__)
        todo.extend(cls.__subclasses__())
    return tuple(seen)


def root_cause(exc: BaseException) -> str:
    """One line: the first library error behind ``exc``, else its own first line.

    On the driver the chain (``raise ... from``) is walked to its innermost library
    error; an error from a Python worker is read out of the text Spark wraps it in (the
    first library error printed there: a worker's traceback prints causes first).
    """
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        # pyspark keeps the JVM-side cause (a task's PythonException behind Spark's
        # "Writing job failed.") as the converted exception's _cause.
        behind = getattr(current, "_cause", None)
        current = current.__cause__ or current.__context__
        current = current or (behind if isinstance(behind, BaseException) else None)
    ours = [e for e in chain if isinstance(e, enrich.EnrichError)]
    if ours:
        return _shorten(f"{type(ours[-1]).__name__}: {_first_line(str(ours[-1]))}")
    names = "|".join(re.escape(n) for n in _project_errors())
    for e in chain:
        found = re.search(rf"^\s*(?:[\w.]+\.)?({names}): (.+)$", str(e), re.MULTILINE)
        if found:
            return _shorten(f"{found.group(1)}: {found.group(2).strip()}")
    for e in chain:
        # a Python error in a worker: the last line of its traceback
        found = re.search(
            r"Traceback \(most recent call last\):\n(?:[ \t].*\n)*([\w.]+: .+)$",
            str(e),
            re.MULTILINE,
        )
        if found:
            return _shorten(found.group(1))
    return _shorten(f"{type(exc).__name__}: {_first_line(str(exc))}")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _shorten(line: str) -> str:
    line = re.sub(r"\s+SQLSTATE: \w+$", "", line.strip())
    return line if len(line) <= _LONGEST else line[: _LONGEST - 3] + "..."


def log_path(name: str, given: str | None = None) -> Path:
    """The job's log file: ``given``, or a new one in the temporary folder."""
    if given:
        return Path(given)
    safe = re.sub(r"[^\w.-]+", "-", name) or "job"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(tempfile.gettempdir()) / f"enrich-{safe}-{stamp}-{os.getpid()}.log"


def report(exc: BaseException, log: Path) -> int:
    """Write ``exc``'s whole trace to ``log``, then print where it is and, as the last
    line, the root cause. Returns the exit code."""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        with open(log, "a") as file:
            file.write(f"\n{time.strftime('%Y-%m-%d %H:%M:%S')} the job failed:\n{trace}")
        where = f"the full trace is in {log}"
    except OSError as error:
        where = f"the full trace could not be written to {log} ({error.strerror})"
    sys.stdout.flush()
    print(where, file=sys.stderr)
    print(f"error: {root_cause(exc)}", file=sys.stderr, flush=True)
    return EXIT_FAILED


@contextlib.contextmanager
def stderr_to(log: Path) -> Iterator[None]:
    """Standard error (the file descriptor) goes to ``log`` inside the block: a JVM
    started there, and the Python workers it forks, write theirs there for good."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "ab") as file:
        os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def failed_rows(totals: Mapping[str, Any], policies: Mapping[str, str] | None = None) -> str | None:
    """One line naming the failed rows by join and reason, or None when none failed.

    Args:
        totals: join name -> its :class:`~enrich.JoinMetrics`.
        policies: join name -> its ``on_error`` as the config wrote it.
    """
    parts = []
    for name, metrics in totals.items():
        failed = sum(metrics.errors.values())
        if failed:
            reasons = ", ".join(f"{k}={v}" for k, v in sorted(metrics.errors.items()))
            policy = (policies or {}).get(name)
            label = f"{name} (on_error {policy})" if policy else name
            parts.append(f"{label}: {failed} of {metrics.rows_in} rows ({reasons})")
    return "rows failed their lookups: " + "; ".join(parts) if parts else None


def over_ratio(totals: Mapping[str, Any], ratio: float | None) -> str | None:
    """The first join whose failed rows passed ``ratio`` of its rows, as a line."""
    if ratio is None:
        return None
    for name, metrics in totals.items():
        failed = sum(metrics.errors.values())
        if failed and metrics.rows_in and failed / metrics.rows_in > ratio:
            return (
                f"join {name!r}: {failed} of {metrics.rows_in} rows failed their lookups "
                f"({failed / metrics.rows_in:.1%}), more than max_error_ratio {ratio:g}"
            )
    return None
