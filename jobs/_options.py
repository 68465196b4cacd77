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

:data:`jobs._formats.KNOWN_OPTIONS` lists, per format, the options its reader or writer
reads: extend it there when a format learns one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jobs import _delta, _kafka
from jobs._endpoints import Endpoint
from jobs._files import ConfigError
from jobs._formats import FORMATS, KNOWN_OPTIONS, did_you_mean

__all__ = ("FORMATS", "KNOWN_OPTIONS", "check_sink", "check_source", "did_you_mean")

OUTPUT_MODES = ("append", "complete", "update")  # a stream's writeStream.outputMode
SAVE_MODES = ("append", "overwrite", "ignore", "error", "errorifexists")  # write.mode
# Spark SQL types our DDL parser leaves to Spark (no dimension store has them).
SPARK_ONLY_TYPES = ("interval", "variant", "void", "null", "object", "geography", "geometry")
_UNSUPPORTED = re.compile(r"unsupported type '([^']*)'")


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
    warnings = _check_options(spec, where, "sink")
    if spec.format == _delta.FORMAT:
        _delta.validate(spec.options, where, path=spec.path, mode=spec.mode, streaming=streaming)
    return warnings


def _check_schema(schema: str, where: str) -> None:
    from enrich._errors import SchemaError
    from enrich.engine.records import ddl

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
        if name.lower() in canonical or _kafka.is_passthrough(spec.format, name):
            options[canonical.get(name.lower(), name)] = value
            continue
        warnings.append(
            f"{where}.options.{name}: not an option of format {spec.format!r}, Spark will "
            f"ignore it{did_you_mean(name, known)} (known: {', '.join(known)})"
        )
    _validate(spec.format, options, role, where)
    return warnings


def _validate(fmt: str, options: Mapping[str, str], role: str, where: str) -> None:
    """The library's own data sources read their options here as they will at start;
    Spark's Kafka connector's are checked by ``jobs._kafka``."""
    if fmt == _kafka.FORMAT:
        _kafka.validate(options, role, where)
        return
    try:
        if (role, fmt) == ("source", "redis-stream"):
            from enrich.spark.streams.stream_options import StreamSettings

            StreamSettings.of(options)
        elif (role, fmt) == ("sink", "redis"):
            from enrich.spark.sink.redis.row_writes import SinkSettings

            SinkSettings.of(options)
    except ValueError as exc:
        raise ConfigError(f"{where}.options: {exc}") from None
    except ImportError:  # no pyspark here, or one without Python data sources: the run
        pass  # will say so; the options are read there
