"""Job configuration files -> spark-enrich objects. No Spark here: only parsing.

A config is YAML, JSON or TOML (by the file's suffix). Strings may name environment
variables as ``${NAME}`` and files as ``${file:/run/secrets/x}``, so that secrets stay
out of the file. The sections (see ``examples/`` for configs that run as they are)::

    source:                       # where rows come from (a streaming read by default)
      format: rate                # rate | files | socket | redis-stream | any Spark format
      options: {rowsPerSecond: 100}
      select: ["value AS order_id", "value % 20 AS user_id"]   # SQL expressions
    stores:                       # dimension stores, by name
      users: {kind: redis, url: "redis://:${REDIS_PASSWORD}@dim:6379/0",
              key_template: "user:{}", value: json, schema: "name string, tier string"}
      credit: {kind: http, url_template: "http://svc/users/{}", schema: "credit double",
               concurrency: auto,             # adaptive requests in flight per process
               job_rate_limit: {rate: 1000, redis_url: "redis://limits:6379"}}  # whole job
    joins:                        # applied in order; every lookup_join setting
      - {store: users, on: user_id, how: left, cache: {max_rows: 100000, ttl: 60},
         # or the whole dimension: cache: {kind: full, reload_interval: 600};
         # shuffle: true routes rows by key first (key affinity)
         retry: {kind: exponential, max_attempts: 3, initial_delay: 0.05, max_delay: 1}}
      - {store: credit, on: user_id, on_error: dead_letter}
      - {function: "mypkg.scoring:score", returns: "score double", capacity: 50}
                                  # a user's async function per row (see jobs/_maps.py)
    lookups: {dim_user: {store: users}}      # SQL functions, for jobs/sql_job.py
    async_udfs: {score: {function: "mypkg.scoring:score", returns: "score double"}}
    lookup_joins: {users_join: {store: users, on: user_id, input: input}}
                                  # SQL table functions: SELECT * FROM users_join(TABLE(input))
    dead_letter: {format: files, path: /data/failed}   # rows whose lookup failed
    sink: {format: console}       # console | files | memory | noop | redis | any format
                                  # {format: kafka, exactly_once: true}: the kafka-eos sink
                                  # {format: delta, path: /data/orders}: Delta, exactly
                                  # once by its own commits (see jobs/_delta.py)
    checkpoint: /data/checkpoints/orders
    trigger: "10 seconds"         # availableNow | once | an interval
    latency: low                  # redis-stream or kafka -> redis only: async progress
                                  # tracking, exactly once keyed by each row's stream_id
                                  # (kafka: topic, partition, offset) (default: "default",
                                  # Spark's synchronous offset and commit logs)
    max_error_ratio: 0.01         # exit code 3 when a join's failed rows pass this share

``sources``/``input``/``output``/``steps`` are accepted for
``stores``/``source``/``sink``/``joins``, and ``source`` for ``store`` in a join, as
older configs wrote them. ``stores`` may be left out by a job whose steps are all
functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jobs._endpoints import Endpoint, sink, source as source_endpoint
from jobs._files import ConfigError, read
from jobs._lookups import (
    DEAD_LETTER,
    JOIN_KEYS,
    LOOKUP_JOIN_KEYS,
    LOOKUP_KEYS,
    settings,
    store,
)
from jobs._maps import MAP_KEYS, UDF_KEYS, is_map_step, map_step
from jobs._options import check_sink, check_source, did_you_mean

__all__ = ("ConfigError", "JobConfig", "load", "parse")

_SECTIONS = {
    "stores": ("stores", "sources"),
    "joins": ("joins", "steps"),
    "source": ("source", "input"),
    "sink": ("sink", "output"),
}
_TOP_KEYS = {
    "name",
    "stores",
    "sources",
    "source",
    "input",
    "joins",
    "steps",
    "lookups",
    "async_udfs",
    "lookup_joins",
    "dead_letter",
    "sink",
    "output",
    "checkpoint",
    "trigger",
    "latency",
    "max_error_ratio",
}
# the units of a processing-time trigger, as Spark's interval parser reads them (any
# case, singular too)
_UNITS = (
    "microseconds",
    "milliseconds",
    "seconds",
    "minutes",
    "hours",
    "days",
    "weeks",
    "months",
    "years",
)
TRIGGERS = ("availableNow", "once", "an interval such as '10 seconds'")
LATENCIES = ("default", "low")


@dataclass(frozen=True)
class JobConfig:
    """A checked job: stores are lookup sources, joins and lookups keyword arguments."""

    stores: dict[str, Any]
    source: Endpoint | None = None
    joins: list[dict[str, Any]] = field(default_factory=list)
    lookups: dict[str, dict[str, Any]] = field(default_factory=dict)
    lookup_joins: dict[str, dict[str, Any]] = field(default_factory=dict)
    # SQL functions calling a user's async function (register_async_udf's arguments)
    async_udfs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sink: Endpoint | None = None
    dead_letter: Endpoint | None = None
    checkpoint: str | None = None
    trigger: str | None = None
    name: str = "enrich-job"
    # store name -> the key `enrich check` looks up there (its `check_key`, or a dummy)
    check_keys: dict[str, Any] = field(default_factory=dict)
    # the job fails (exit code 3) when a join's failed rows exceed this share of its rows
    max_error_ratio: float | None = None
    # what Spark would silently ignore (unknown options): one line each, said before a run
    warnings: tuple[str, ...] = ()
    # "low": enrich.spark.low_latency's profile (async progress tracking, keyed sink)
    latency: str = "default"

    @property
    def input(self) -> Endpoint | None:
        return self.source

    @property
    def output(self) -> Endpoint | None:
        return self.sink


def load(path: str | Path) -> JobConfig:
    """Read and check a job config; stores and settings become library objects.

    Raises:
        ConfigError: the file cannot be read, decoded or parsed, or a value is wrong (one
            line: the file, the place in the config, what is wrong and what is allowed).
    """
    try:
        return parse(read(path))
    except ConfigError as exc:
        if str(path) in str(exc):
            raise
        raise ConfigError(f"{path}: {exc}") from None


def parse(raw: dict[str, Any]) -> JobConfig:
    """Check plain config data (already expanded) and build its objects."""
    if not isinstance(raw, dict):
        raise ConfigError("the config must be a mapping")
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown section(s) {unknown}{did_you_mean(unknown[0], _TOP_KEYS)} "
            f"(known: {sorted(_TOP_KEYS)})"
        )
    store_specs = _section(raw, "stores", dict, required=False)
    stores = {str(name): store(spec, f"stores.{name}") for name, spec in store_specs.items()}
    dead_letter = raw.get(DEAD_LETTER) is not None
    joins = [
        map_step(join, f"joins[{i}]", MAP_KEYS, dead_letter)
        if is_map_step(join)
        else settings(join, f"joins[{i}]", stores, JOIN_KEYS, dead_letter)
        for i, join in enumerate(_section(raw, "joins", list, required=False))
    ]
    lookups = {
        str(name): settings(spec, f"lookups.{name}", stores, LOOKUP_KEYS, False)
        for name, spec in _section(raw, "lookups", dict, required=False).items()
    }
    lookup_joins = {
        str(name): settings(spec, f"lookup_joins.{name}", stores, LOOKUP_JOIN_KEYS, False)
        for name, spec in _section(raw, "lookup_joins", dict, required=False).items()
    }
    async_udfs = {
        str(name): map_step(spec, f"async_udfs.{name}", UDF_KEYS, False)
        for name, spec in _section(raw, "async_udfs", dict, required=False).items()
    }
    source_spec = _section(raw, "source", dict, required=False)
    sink_spec = _section(raw, "sink", dict, required=False)
    config = JobConfig(
        stores=stores,
        source=source_endpoint(source_spec, "source") if source_spec else None,
        joins=joins,
        lookups=lookups,
        lookup_joins=lookup_joins,
        async_udfs=async_udfs,
        sink=sink(sink_spec, "sink") if sink_spec else None,
        dead_letter=sink(raw[DEAD_LETTER], DEAD_LETTER) if dead_letter else None,
        checkpoint=_optional_string(raw, "checkpoint"),
        trigger=_trigger(raw.get("trigger")),
        name=_optional_string(raw, "name") or "enrich-job",
        check_keys={str(n): _check_key(spec, f"stores.{n}") for n, spec in store_specs.items()},
        max_error_ratio=_ratio(raw.get("max_error_ratio")),
        latency=_latency(raw.get("latency", "default")),
    )
    _check_latency(config)
    return replace(config, warnings=tuple(_endpoint_warnings(config)))


def _endpoint_warnings(config: JobConfig) -> list[str]:
    """Check the source and sinks as Spark will read them (see ``jobs._options``)."""
    warnings = []
    if config.source is not None:
        warnings += check_source(config.source, "source")
    # The sink is a stream's (output mode) unless a batch writer writes it: the
    # dead-letter split writes each micro-batch, and a batch job writes once.
    streaming: bool | None = None
    if config.dead_letter is not None:
        streaming = False
    elif config.source is not None:
        streaming = config.source.streaming
    if config.sink is not None:
        warnings += check_sink(config.sink, "sink", streaming=streaming)
    if config.dead_letter is not None:
        warnings += check_sink(config.dead_letter, DEAD_LETTER, streaming=False)
        for where, spec in (("sink", config.sink), (DEAD_LETTER, config.dead_letter)):
            if spec is not None and spec.kind == "memory":
                raise ConfigError(
                    f"{where}: a memory sink cannot be used with a dead_letter (use files, "
                    f"console or a format with a batch writer)"
                )
    return warnings


def _section(raw: dict[str, Any], name: str, kind: type, *, required: bool = True) -> Any:
    names = _SECTIONS.get(name, (name,))
    present = [n for n in names if n in raw]
    if not present:
        if required:
            raise ConfigError(f"the config needs a {name!r} section")
        return kind()
    value = raw[present[0]]
    if not isinstance(value, kind):
        expected = "a mapping" if kind is dict else "a list"
        raise ConfigError(f"{present[0]} must be {expected}, got {value!r}")
    return value


def _optional_string(raw: dict[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _trigger(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"trigger must be one of {TRIGGERS}, got {value!r}")
    if value in ("availableNow", "once"):
        return value
    parts = value.split()
    if len(parts) == 2 and _is_number(parts[0]):
        unit = parts[1].lower()
        if unit in _UNITS or unit + "s" in _UNITS:
            return value
        raise ConfigError(
            f"trigger {value!r}: Spark knows no unit {parts[1]!r}"
            f"{did_you_mean(unit, _UNITS)} (units: {', '.join(_UNITS)})"
        )
    raise ConfigError(f"trigger must be one of {TRIGGERS}, got {value!r}")


def _latency(value: Any) -> str:
    if value not in LATENCIES:
        raise ConfigError(
            f"latency must be one of {', '.join(LATENCIES)}, got {value!r}"
            f"{did_you_mean(value, LATENCIES)}"
        )
    return str(value)


def _check_latency(config: JobConfig) -> None:
    """``latency: low`` only where it keeps exactly once (see enrich.spark.low_latency):
    a streaming redis-stream or kafka source straight into the redis sink, a processing-time
    trigger (async progress tracking refuses the others)."""
    if config.latency != "low":
        return
    # The sources latency: low takes, and the columns a select must keep for the sink's
    # key (here: enrich.spark needs pyspark, which a config check alone does not).
    from enrich.spark.sink.sink_spi import KEYED_SOURCES

    source, sink = config.source, config.sink
    why = None
    if sink is not None and sink.format == "kafka-eos":
        if source is None or source.format not in KEYED_SOURCES or not source.streaming:
            why = "the kafka-eos sink needs a streaming kafka or redis-stream source"
        elif config.trigger in ("availableNow", "once"):
            why = f"async progress tracking takes interval triggers only, not {config.trigger}"
        if why is not None:
            raise ConfigError(f"latency: low: {why}")
        return
    if source is None or source.format not in KEYED_SOURCES or not source.streaming:
        why = (
            "the source must be a streaming redis-stream or kafka source (its rows carry "
            "their entry ids: a stream entry id; a topic, partition and offset)"
        )
    elif sink is not None and sink.format == "delta":
        why = (
            "the delta sink takes no async progress tracking: it commits each micro-batch "
            "once by its batch id, and a restart under async progress tracking re-cuts the "
            "batches (Spark refuses it too); Delta is exactly once on the default latency"
        )
    elif sink is None or sink.format != "redis":
        why = "the sink must be the redis sink (it publishes each source entry once)"
    elif config.dead_letter is not None:
        why = (
            "a dead_letter writes both sinks per micro-batch (foreachBatch, at-least-once); "
            "use the redis sink's own dead_letter option instead"
        )
    elif sink.select:
        why = "sink.select is not applied under latency: low (the sink writes each row as joined)"
    elif config.trigger in ("availableNow", "once"):
        why = f"Spark's async progress tracking takes interval triggers only, not {config.trigger}"
    elif source.select and not all(
        any(_keeps(e, column) for e in source.select) for column in KEYED_SOURCES[source.format]
    ):
        kept = " and ".join(KEYED_SOURCES[source.format])
        why = f"source.select must keep {kept} (each row's source record, the sink's key)"
    if why is not None:
        raise ConfigError(f"latency: low: {why}")


def _keeps(expression: str, column: str) -> bool:
    text = expression.strip()
    return text == "*" or text.split()[-1].strip("`") == column


def _check_key(spec: dict[str, Any], where: str) -> Any:
    """A store's ``check_key``: a scalar, or a list for a composite key (a tuple)."""
    key = spec.get("check_key", 0)
    if isinstance(key, list):
        key = tuple(key)
    parts = key if isinstance(key, tuple) else (key,)
    if not parts or not all(isinstance(p, (str, int, float, bytes)) for p in parts):
        raise ConfigError(
            f"{where}.check_key must be a key (a string or a number, or a list of them for "
            f"a composite key), got {spec.get('check_key')!r}"
        )
    return key


def _ratio(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(
            f"max_error_ratio must be a number from 0 to 1 (the share of a join's rows that "
            f"may fail), got {value!r}"
        )
    return float(value)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
