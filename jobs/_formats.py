"""What the job's formats are known to read, and the hints built on it.

Below both the parsing of a source or sink (``jobs._endpoints``) and its checks
(``jobs._options``): each names a misspelt setting with the closest known one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from jobs import _delta, _kafka

# Options read by each format's reader or writer, as Spark spells them (names compare
# without case: Spark's options are case-insensitive). Only formats listed here get
# their unknown options flagged.
KNOWN_OPTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("source", "redis-stream"): (
        "url",
        "stream",
        "startingPosition",
        "maxEntriesPerTrigger",
        "failOnDataLoss",
        "mode",
        "columnNameOfCorruptRecord",
        "partitionsPerStream",
    ),
    ("sink", "redis"): (
        "url",
        "stream",
        "key",
        "value",
        "mode",
        "dead_letter",
        "error_column",
        "checkpointLocation",
        "stagingTtl",
        "maxRowsPerCommit",
        "atomicCommit",
        "sourceIdColumn",
        "sourceStreamColumn",
        "sourceStreams",
        "publishFrom",
        "closeLostPlan",
        "asyncProgressTrackingEnabled",  # Spark's query option, read by the sink too
    ),
    ("sink", "kafka-eos"): (
        "kafka.bootstrap.servers",
        "topic",
        "checkpointLocation",
        "sinkName",
        "valueColumn",
        "keyColumn",
        "sourceIdColumn",
        "sourceStreamColumn",
        "marksTopic",
        "marksPartitions",
        "transactionalIdPrefix",
        "maxTransactionRetries",
        "asyncProgressTrackingEnabled",
    ),
    ("sink", "kafka-alo"): ("kafka.bootstrap.servers", "topic", "valueColumns"),
    ("source", "rate"): ("rowsPerSecond", "numPartitions", "rampUpTime"),
    ("source", "socket"): ("host", "port", "includeTimestamp"),
    ("sink", "console"): ("numRows", "truncate"),
    ("sink", "noop"): (),
    # Spark's Kafka connector; kafka.* options go to the Kafka client (jobs._kafka).
    ("source", "kafka"): _kafka.SOURCE_OPTIONS,
    ("sink", "kafka"): _kafka.SINK_OPTIONS,
    # Delta Lake's writer (its streaming sink and the batch writes of a dead-letter split)
    ("sink", "delta"): _delta.SINK_OPTIONS,
}
# Formats Spark (and common packages) know, for a "did you mean" on a misspelt one; a
# format not listed is not an error: any data source on the classpath may be named.
FORMATS = (
    "rate",
    "socket",
    "console",
    "memory",
    "noop",
    "parquet",
    "json",
    "csv",
    "orc",
    "text",
    "avro",
    "xml",
    "binaryFile",
    "kafka",
    "delta",
    "iceberg",
    "jdbc",
    "redis",
    "redis-stream",
    "kafka-eos",
    "kafka-alo",
)


def did_you_mean(value: object, allowed: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` when ``value`` is close to one of ``allowed``, else ``""``."""
    if not isinstance(value, str):
        return ""
    names = list(allowed)
    by_lower = {n.lower(): n for n in names}
    close = difflib.get_close_matches(value.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def misplaced(spec: Mapping[str, Any], unknown: list[str], role: str) -> str:
    """A hint for keys at a source's or sink's top level that are options of its format."""
    fmt = spec.get("format")
    known = KNOWN_OPTIONS.get((role, fmt), ()) if isinstance(fmt, str) else ()
    lowered = {k.lower() for k in known}
    options = [k for k in unknown if k.lower() in lowered]
    if not options:
        return ""
    verb = "is an option" if len(options) == 1 else "are options"
    return f"; {', '.join(options)} {verb} of format {fmt!r}: put it under options"
