"""A job's source and sinks: a Spark ``format`` plus ``options``, with named shortcuts.

Any Spark format works by its name (``kafka``, ``delta``, the Python data sources
``redis-stream`` and ``redis`` once registered); the shortcuts only fill in what their
format needs and check it early:

============  ==============================================================
source        what it needs
============  ==============================================================
rate          nothing (``options: {rowsPerSecond: N}``); columns timestamp, value
files         ``path`` and ``schema``; ``file_format`` json (default), csv, parquet...
socket        ``host`` and ``port`` (text lines in a column ``value``)
============  ==============================================================

============  ==============================================================
sink          what it needs
============  ==============================================================
console       nothing (``options: {numRows: 20, truncate: false}``)
files         ``path``; ``file_format`` parquet (default), json, csv...
memory        ``name``: the table to query (``SELECT * FROM name``)
noop          nothing (runs the job, keeps no rows: for load tests)
============  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs._files import ConfigError
from jobs._formats import did_you_mean, misplaced

SOURCE_SHORTCUTS = ("rate", "files", "socket")
SINK_SHORTCUTS = ("console", "files", "memory", "noop")
_SOURCE_KEYS = {"format", "options", "path", "schema", "select", "streaming", "file_format"}
_SOURCE_KEYS |= {"host", "port"}
_SINK_KEYS = {"format", "options", "path", "mode", "name", "file_format", "select"}
_SINK_KEYS |= {"exactly_once"}
# ``exactly_once: true`` turns a format into its exactly-once sink.
_EXACTLY_ONCE = {"kafka": "kafka-eos", "kafka-eos": "kafka-eos"}


@dataclass(frozen=True)
class Endpoint:
    """A source or sink: the Spark format and what the reader or writer is given.

    Attributes:
        format: the Spark format name (a shortcut resolved: ``files`` -> ``json``...).
        kind: the shortcut the config named, or the format itself.
        options: reader/writer options, as strings.
        path: the ``load``/``start`` path, if any.
        schema: a DDL schema for the reader, if any.
        select: SQL expressions applied to the rows read (a source), or to the rows
            before they are written (a sink: Spark's Kafka sink writes ``value``, and
            ``key``, ``topic``, ``headers`` when present).
        streaming: read as a stream (sources only; the default).
        mode: the output mode of a stream (append...) or the save mode of a batch write.
        name: a memory sink's table name (the query's name).
    """

    format: str
    kind: str
    options: dict[str, str] = field(default_factory=dict)
    path: str | None = None
    schema: str | None = None
    select: tuple[str, ...] = ()
    streaming: bool = True
    mode: str | None = None
    name: str | None = None


def source(spec: Any, where: str) -> Endpoint:
    """The job's source from its config section."""
    options, kind = _common(spec, where, _SOURCE_KEYS)
    streaming = spec.get("streaming", True)
    if not isinstance(streaming, bool):
        raise ConfigError(f"{where}.streaming must be true or false, got {streaming!r}")
    select = _select(spec, where)
    fmt = kind
    if kind == "files":
        fmt = _string(spec, "file_format", where) or "json"
        _require(spec, where, "path", "a folder of files")
        if streaming:
            _require(spec, where, "schema", "a DDL schema such as 'id long, name string'")
    elif kind == "socket":
        for name in ("host", "port"):
            _require(spec, where, name, "where the text server listens")
            options[name] = _option(spec[name])
    elif kind == "rate" and not streaming:
        raise ConfigError(f"{where}: the rate source is streaming only (streaming: true)")
    return Endpoint(
        format=fmt,
        kind=kind,
        options=options,
        path=_string(spec, "path", where),
        schema=_string(spec, "schema", where),
        select=select,
        streaming=streaming,
    )


def _select(spec: dict[str, Any], where: str) -> tuple[str, ...]:
    select = spec.get("select", [])
    if isinstance(select, str):
        select = [select]
    if not isinstance(select, list) or not all(isinstance(s, str) for s in select):
        raise ConfigError(f"{where}.select must be a list of SQL expressions, got {select!r}")
    return tuple(select)


def sink(spec: Any, where: str) -> Endpoint:
    """A sink (the job's output or its dead letter) from its config section."""
    options, kind = _common(spec, where, _SINK_KEYS)
    fmt = kind
    if kind == "files":
        fmt = _string(spec, "file_format", where) or "parquet"
        _require(spec, where, "path", "the folder to write to")
    elif kind == "memory":
        _require(spec, where, "name", "the table name to query the rows by")
    once = spec.get("exactly_once", False)
    if not isinstance(once, bool):
        raise ConfigError(f"{where}.exactly_once must be true or false, got {once!r}")
    if once:
        if kind not in _EXACTLY_ONCE:
            raise ConfigError(
                f"{where}: exactly_once is for format kafka (the kafka-eos sink: each "
                f"source record's rows written once, in Kafka transactions), not {kind!r}; "
                "the redis sink is exactly once in its own mode transactional"
            )
        fmt = _EXACTLY_ONCE[kind]
    return Endpoint(
        format=fmt,
        kind=kind,
        options=options,
        path=_string(spec, "path", where),
        mode=_string(spec, "mode", where),
        name=_string(spec, "name", where),
        select=_select(spec, where),
    )


def _common(spec: Any, where: str, allowed: set[str]) -> tuple[dict[str, str], str]:
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be a mapping, got {spec!r}")
    unknown = sorted(set(spec) - allowed)
    if unknown:
        role = "source" if "streaming" in allowed else "sink"
        raise ConfigError(
            f"{where}: unknown setting(s) {unknown}{did_you_mean(unknown[0], allowed)} "
            f"(known: {', '.join(sorted(allowed))}){misplaced(spec, unknown, role)}"
        )
    kind = spec.get("format")
    if not isinstance(kind, str) or not kind:
        shortcuts = SOURCE_SHORTCUTS if "streaming" in allowed else SINK_SHORTCUTS
        raise ConfigError(
            f"{where}.format must be one of {shortcuts} or a Spark format name, got {kind!r}"
        )
    options = spec.get("options", {})
    if not isinstance(options, dict):
        raise ConfigError(f"{where}.options must be a mapping, got {options!r}")
    bad = [k for k, v in options.items() if isinstance(v, (dict, list)) or v is None]
    if bad:
        raise ConfigError(
            f"{where}.options.{bad[0]} must be a string, number or boolean, got {options[bad[0]]!r}"
        )
    return {str(k): _option(v) for k, v in options.items()}, kind


def _option(value: Any) -> str:
    # Spark's options are strings; YAML's true must read as Spark's "true".
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _require(spec: dict[str, Any], where: str, name: str, what: str) -> None:
    if spec.get(name) in (None, ""):
        raise ConfigError(f"{where}: format {spec['format']!r} needs {name!r} ({what})")


def _string(spec: dict[str, Any], name: str, where: str) -> str | None:
    value = spec.get(name)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}.{name} must be a string, got {value!r}")
    return value
