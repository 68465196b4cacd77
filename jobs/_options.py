"""What ``enrich check`` and ``enrich run`` find in a source or sink before Spark would.

Spark reads a reader's or writer's options as it likes and ignores the ones it does not
know, silently; it parses a ``schema`` and an output mode only once the query starts,
and then fails with a long trace. Here the job's own checks come first, one line each:

- a source ``schema`` is parsed with the library's DDL parser (a misspelt type is named
  with the types allowed and the closest one);
- a sink's ``mode`` is Spark's (the stream's output mode, or a batch write's save mode);
  a value that belongs to the format's own ``mode`` option is sent to ``options``;
- the options of the library's own formats (``redis-stream``, ``redis``) are read by
  their data sources' validators (``StreamSettings.of``, ``SinkSettings.of``), and an
  option a format does not know is a warning naming the closest known one.

:data:`KNOWN_OPTIONS` lists, per format, the options its reader or writer reads: extend
it there when a format learns one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from jobs._files import ConfigError

if TYPE_CHECKING:
    from jobs._endpoints import Endpoint

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
    ),
    ("source", "rate"): ("rowsPerSecond", "numPartitions", "rampUpTime"),
    ("source", "socket"): ("host", "port", "includeTimestamp"),
    ("sink", "console"): ("numRows", "truncate"),
    ("sink", "noop"): (),
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
)
OUTPUT_MODES = ("append", "complete", "update")  # a stream's writeStream.outputMode
SAVE_MODES = ("append", "overwrite", "ignore", "error", "errorifexists")  # write.mode
# Spark SQL types our DDL parser leaves to Spark (no dimension store has them).
SPARK_ONLY_TYPES = ("interval", "variant", "void", "null", "object", "geography", "geometry")
_UNSUPPORTED = re.compile(r"unsupported type '([^']*)'")


def did_you_mean(value: object, allowed: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` when ``value`` is close to one of ``allowed``, else ``""``."""
    if not isinstance(value, str):
        return ""
    names = list(allowed)
    by_lower = {n.lower(): n for n in names}
    close = difflib.get_close_matches(value.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def check_source(spec: Endpoint, where: str) -> list[str]:
    """Raise :class:`ConfigError` for what would fail the query; the warnings' lines."""
    if spec.schema is not None:
        _check_schema(spec.schema, f"{where}.schema")
    return _check_options(spec, where, "source")


def check_sink(spec: Endpoint, where: str, *, streaming: bool | None) -> list[str]:
    """As :func:`check_source`, for a sink written as a stream (``streaming``), by a batch
    writer (not ``streaming``: a dead-letter split or a batch job), or either (None)."""
    if spec.mode is not None:
        _check_mode(spec, where, streaming)
    return _check_options(spec, where, "sink")


def _check_schema(schema: str, where: str) -> None:
    from enrich._errors import SchemaError
    from enrich.lookup import ddl

    try:
        ddl.parse_fields(schema)
    except SchemaError as exc:
        found = _UNSUPPORTED.search(str(exc))
        if found and found.group(1).lower() in SPARK_ONLY_TYPES:
            return  # Spark's to parse
        raise ConfigError(f"{where}: {exc}") from None


def _check_mode(spec: Endpoint, where: str, streaming: bool | None) -> None:
    mode = spec.mode
    if streaming is None:
        allowed = tuple(dict.fromkeys(OUTPUT_MODES + SAVE_MODES))
        what = "Spark's output mode or save mode"
    elif streaming:
        allowed, what = OUTPUT_MODES, "Spark's output mode (writeStream.outputMode)"
    else:
        allowed, what = SAVE_MODES, "Spark's save mode (write.mode)"
    if isinstance(mode, str) and mode.lower() in allowed:
        return
    own = KNOWN_OPTIONS.get(("sink", spec.format), ())
    belongs = ""
    if "mode" in own:
        belongs = (
            f"; the {spec.format!r} sink's own mode is an option: put it under {where}.options.mode"
        )
    hint = "" if belongs else did_you_mean(mode, allowed)
    raise ConfigError(
        f"{where}.mode is {what}, one of {', '.join(allowed)}; got {mode!r}{hint}{belongs}"
    )


def _check_options(spec: Endpoint, where: str, role: str) -> list[str]:
    known = KNOWN_OPTIONS.get((role, spec.format))
    if known is None:
        lowered = {f.lower() for f in FORMATS}
        hint = did_you_mean(spec.format, FORMATS)
        if spec.format.lower() not in lowered and hint:
            field = "file_format" if spec.kind == "files" else "format"
            return [f"{where}.{field}: Spark may know no format {spec.format!r}{hint}"]
        return []
    canonical = {name.lower(): name for name in known}
    warnings = []
    options: dict[str, str] = {}
    for name, value in spec.options.items():
        if name.lower() in canonical:
            options[canonical[name.lower()]] = value
            continue
        warnings.append(
            f"{where}.options.{name}: not an option of format {spec.format!r}, Spark will "
            f"ignore it{did_you_mean(name, known)} (known: {', '.join(known)})"
        )
    _validate(spec.format, options, role, where)
    return warnings


def _validate(fmt: str, options: Mapping[str, str], role: str, where: str) -> None:
    """The library's own data sources read their options here as they will at start."""
    try:
        if (role, fmt) == ("source", "redis-stream"):
            from enrich.spark.streams.settings import StreamSettings

            StreamSettings.of(options)
        elif (role, fmt) == ("sink", "redis"):
            from enrich.spark.sink.rows import SinkSettings

            SinkSettings.of(options)
    except ValueError as exc:
        raise ConfigError(f"{where}.options: {exc}") from None
    except ImportError:  # no pyspark here, or one without Python data sources: the run
        pass  # will say so; the options are read there


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
