"""A job's Delta sink (Delta Lake's own ``delta`` format), checked before Spark starts.

Delta's streaming sink is exactly once by its commit protocol (each micro-batch one
table version, keyed by the query's id and the batch id: see :mod:`enrich.spark.sink.delta.jars`).
The checks keep Spark's and Delta's names and refuse, one line each, what the query
would refuse at start or what would break exactly once:

- the table's folder is the sink's ``path`` (or ``options.path``);
- a stream's output mode is ``append`` or ``complete`` (Delta's sink has no ``update``);
- ``txnAppId``/``txnVersion`` are Delta's keys for batch writes; a streaming sink keys
  its batches itself, so they are refused there. A job with a ``dead_letter`` writes
  each micro-batch with Delta's batch writer (``foreachBatch``), and ``jobs._streams``
  sets them itself (:func:`enrich.spark.sink.delta.keying.transaction_id`), so a
  replayed batch is skipped there too;
- ``latency: low`` is refused by the config (async progress tracking re-cuts batches).

:func:`delta_checks` is ``enrich check``'s line per Delta sink: Delta's jars fetched and
built for the running pyspark's line, and where the table stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs._files import ConfigError

FORMAT = "delta"
# What Delta's writer reads (DeltaOptions, Delta 4.x), besides Spark's checkpointLocation.
SINK_OPTIONS = (
    "checkpointLocation",
    "path",
    "mergeSchema",
    "overwriteSchema",
    "userMetadata",
    "maxRecordsPerFile",
    "optimizeWrite",
    "compression",
    "replaceWhere",
    "partitionOverwriteMode",
    "dataChange",
    "txnAppId",
    "txnVersion",
)
STREAM_MODES = ("append", "complete")
TRANSACTION = ("txnappid", "txnversion")  # Delta's idempotent batch writes' keys


def validate(
    options: Mapping[str, str],
    where: str,
    *,
    path: str | None,
    mode: str | None,
    streaming: bool | None,
) -> None:
    """Raise :class:`ConfigError` for what Delta's sink would refuse at start, or what
    would break its exactly once; ``options`` keyed by Delta's spelling."""
    lowered = {k.lower(): v for k, v in options.items()}
    if not (path or lowered.get("path", "").strip()):
        raise ConfigError(
            f"{where}: format 'delta' needs path (the table's folder: {where}.path, or "
            f"{where}.options.path)"
        )
    if not streaming:
        return
    if mode is not None and mode.lower() not in STREAM_MODES:
        raise ConfigError(
            f"{where}.mode: Delta's streaming sink takes output mode append or complete, "
            f"got {mode!r}"
        )
    given = [name for name in options if name.lower() in TRANSACTION]
    if given:
        raise ConfigError(
            f"{where}.options.{given[0]}: txnAppId and txnVersion key Delta's batch writes; "
            "its streaming sink keys each micro-batch by the query's id and the batch id "
            "itself (exactly once without them)"
        )


def delta_checks(config: Any) -> list[tuple[str, bool, str]]:
    """One ``(endpoint, ok, detail)`` per Delta sink of ``config`` (``enrich check``
    prints each as a line): ok when Delta's jars are fetched and built for the running
    pyspark's line, with where the table stands; else why, in one line."""
    from pathlib import Path

    found: list[tuple[str, bool, str]] = []
    for where in ("sink", "dead_letter"):
        spec = getattr(config, where, None)
        if spec is None or spec.format != FORMAT:
            continue
        try:
            from enrich.spark.sink.delta.jars import (
                DeltaUnavailable,
                check_spark_line,
                delta_jars,
            )
        except ImportError as exc:  # no pyspark here
            found.append((where, False, f"Delta needs pyspark: {exc}"))
            continue
        try:
            jars = delta_jars()
            check_spark_line(jars)
        except (DeltaUnavailable, ImportError) as exc:
            found.append((where, False, str(exc)))
            continue
        table = Path(spec.path or spec.options.get("path", ""))
        log = table / "_delta_log"
        versions = sorted(int(p.stem) for p in log.glob("*.json") if p.stem.isdigit())
        state = f"table at version {versions[-1]}" if versions else "a new table"
        found.append((where, True, f"Delta's jars found ({len(jars)} jars); {table}: {state}"))
    return found
