"""Rows to Redis writes: the options of the ``redis`` sink and how each row is written.

A row becomes one operation, a list ``[kind, key, *arguments]`` of text (or bytes: binary
values in hash fields and entries):

- ``["x", stream, field, value, ...]``: append an entry to a stream (``XADD *``);
- ``["h", key, field, value, ...]``: replace a hash (``DEL`` then ``HSET``);
- ``["s", key, json]``: set a string key to the row as a JSON object.

Values are encoded by :mod:`enrich.spark.sink.redis.codec` (its table says how each type is
written), so that ``RedisLookup`` with the same schema reads them back unchanged. Null
columns are left out of entries and hashes (Redis has no null); JSON keeps them as
``null``. Rows whose error column (``lookup_join(..., on_error="error_column")``) is set
go to the ``dead_letter`` stream instead, when one is configured.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from json.encoder import encode_basestring
from typing import Any

from pyspark.sql.types import StructType

from ... import redis_options
from . import by_source, codec
from .two_phase import SourceFields, layout

FORMAT = "redis"
DEFAULT_ERROR_COLUMN = "enrich_error"
DEFAULT_STAGING_TTL = 7 * 24 * 3600  # seconds a crashed attempt's staging may linger

# The most operations one step of a transactional commit publishes by default (one Lua
# script: Redis serves no other client while it runs). A step costs 3.5-4.5 us a row on
# this project's 2-core reference machine with Redis alone, 8-12 us with other busy
# processes beside it (SLOWLOG: a 200k-row batch at load 19 on 2 cores took a median of
# 12.6 ms a 1,000-row step, 23 ms a 2,000-row step): 1,000 rows keep a step well under
# the 50 ms every other client may wait, and cost one round trip per 1,000 rows.
STEP_ROWS = 1_000


class SinkMode(Enum):
    """How a batch reaches Redis."""

    IDEMPOTENT = "idempotent"  # executors write directly; a replay rewrites the same keys
    TRANSACTIONAL = "transactional"  # executors stage; the driver's commit publishes atomically


@dataclass(frozen=True)
class SinkSettings:
    """The sink's options, read once on the driver.

    ``identity`` names this writer's commit marker and staging keys. Spark tells a
    writer nothing about its query, so the identity is derived from the options: a hash of
    the target (stream or key template) and the ``checkpointLocation``. Two queries with
    the same target and checkpoint are the same writer; moving the checkpoint starts a
    new one (with its own marker, so its batch ids start afresh).
    """

    url: str
    stream: str | None
    key: str | None
    value: str  # "hash" or "json" (key targets)
    mode: SinkMode
    dead_letter: str | None
    error_column: str
    checkpoint: str | None
    staging_ttl: int
    # The most operations one commit script publishes (``maxRowsPerCommit``): the step of
    # a stepwise commit; with ``atomic``, the largest batch accepted. None: no bound.
    max_rows: int | None = STEP_ROWS
    atomic: bool = False  # atomicCommit: the whole batch in one script, seen whole or not
    # sourceIdColumn (and sourceStreamColumn): exactly once keyed by the source record
    # (enrich.spark.sink.redis.by_source); None: keyed by batch id.
    source: SourceFields | None = None
    async_progress: bool = False  # the query runs under Spark's async progress tracking
    # closeLostPlan: a plan whose staging expired or was lost is closed (its batch taken
    # as published whole: nothing twice, its unpublished rest dropped) instead of failing
    # every commit (see enrich.spark.sink.redis.two_phase.close_plan)
    close_lost_plan: bool = False
    # sourceStreams: the streams the query reads, if known
    # (enrich.spark.sink.redis.two_phase.layout)
    streams: tuple[str, ...] = ()
    # publishFrom=tasks: keyed by the source record, each task publishes its own rows and
    # the commit only settles the marks (enrich.spark.sink.redis.two_phase.from_tasks)
    from_tasks: bool = False

    @classmethod
    def of(cls, options: Mapping[str, str]) -> SinkSettings:
        url = redis_options.required(options, "url", FORMAT)
        redis_options.endpoint(url)
        stream, key = options.get("stream"), options.get("key")
        if (stream is None) == (key is None):
            raise ValueError(
                'the "redis" sink needs exactly one target: .option("stream", name) to append '
                'entries, or .option("key", "prefix:{column}") to upsert keys; got '
                f"stream={stream!r}, key={key!r}"
            )
        value = str(options.get("value", "hash")).lower()
        if value not in ("hash", "json"):
            raise ValueError(f'option value must be "hash" or "json", got {value!r}')
        mode_text = str(options.get("mode", SinkMode.TRANSACTIONAL.value)).lower()
        try:
            mode = SinkMode(mode_text)
        except ValueError:
            raise ValueError(
                f'option mode must be "idempotent" or "transactional", got {mode_text!r}'
            ) from None
        ttl = redis_options.positive_int(options, "stagingTtl", DEFAULT_STAGING_TTL)
        assert ttl is not None
        atomic = _flag(options, "atomicCommit")
        # Stepwise, the bound is a step (STEP_ROWS by default); atomic, a refusal (none).
        rows = redis_options.row_limit(options, "maxRowsPerCommit", 0 if atomic else STEP_ROWS)
        source = by_source.source_fields(options)
        asynchronous = by_source.check_mode(options, source, mode is SinkMode.TRANSACTIONAL)
        from_tasks = by_source.publish_from(options, source)
        if from_tasks and atomic:
            raise ValueError(
                'options publishFrom="tasks" and atomicCommit=true exclude each other: '
                "publishing from the tasks, each task's rows appear as it writes them, "
                "so a batch cannot be seen whole or not at all"
            )
        return cls(
            url=url,
            stream=stream,
            key=key,
            value=value,
            mode=mode,
            dead_letter=options.get("dead_letter"),
            error_column=str(options.get("error_column", DEFAULT_ERROR_COLUMN)),
            checkpoint=options.get("checkpointLocation"),
            staging_ttl=ttl,
            max_rows=rows,
            atomic=atomic,
            source=source,
            async_progress=asynchronous,
            close_lost_plan=_flag(options, "closeLostPlan"),
            streams=layout.streams_of(options),
            from_tasks=from_tasks,
        )

    @property
    def target(self) -> str:
        return f"stream:{self.stream}" if self.stream is not None else f"key:{self.key}"

    @property
    def identity(self) -> str:
        text = f"{self.target}\n{self.checkpoint or ''}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __repr__(self) -> str:
        return (
            f"SinkSettings(url={redis_options.masked(self.url)!r}, target={self.target!r}, "
            f"value={self.value!r}, mode={self.mode.value!r}, dead_letter={self.dead_letter!r}, "
            f"max_rows={self.max_rows!r}, atomic={self.atomic!r}, source={self.source!r}, "
            f"from_tasks={self.from_tasks!r})"
        )


def _flag(options: Mapping[str, str], name: str) -> bool:
    """A boolean option: ``true`` or ``false`` (any case), false when absent."""
    text = str(options.get(name, "false")).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, got {options[name]!r}")
    return text == "true"


class RowEncoder:
    """Turns rows of one schema into operations (see the module docstring)."""

    def __init__(self, settings: SinkSettings, schema: StructType) -> None:
        self.settings = settings
        self.schema = schema
        self.columns = [f.name for f in schema.fields]
        self.error_index = self._error = (
            self.columns.index(settings.error_column)
            if settings.dead_letter and settings.error_column in self.columns
            else None
        )
        self._key_fields: list[tuple[str, int]] = []
        if settings.key is not None:
            self._key_fields = _template_fields(settings.key, self.columns)
        self._field_specs = [
            (name, codec.field_encoder(f.dataType))
            for name, f in zip(self.columns, schema.fields, strict=True)
        ]
        self._json_specs = [
            (encode_basestring(name) + ":", codec.json_encoder(f.dataType))
            for name, f in zip(self.columns, schema.fields, strict=True)
        ]
        self._key_text = [
            codec.field_encoder(schema.fields[index].dataType) for _, index in self._key_fields
        ]

    def field_type(self, index: int) -> Any:
        """The Spark type of column ``index``."""
        return self.schema.fields[index].dataType

    def encode(self, row: Sequence[Any]) -> list[str | bytes]:
        """The operation writing ``row`` (a Row or a tuple of values in column order).

        Raises:
            ValueError: a key column is null (the message names the column and the row).
        """
        if self._error is not None and row[self._error] is not None:
            assert self.settings.dead_letter is not None
            return ["x", self.settings.dead_letter, *self._fields(row)]
        if self.settings.stream is not None:
            return ["x", self.settings.stream, *self._fields(row)]
        key = self._key(row)
        if self.settings.value == "json":
            return ["s", key, self.document(row)]
        return ["h", key, *self._fields(row)]

    def document(self, row: Sequence[Any]) -> str:
        """The row as a JSON object, every column by name (nulls as ``null``)."""
        parts = [
            name + ("null" if value is None else encode(value))
            for (name, encode), value in zip(self._json_specs, row, strict=True)
        ]
        return "{" + ",".join(parts) + "}"

    def _fields(self, row: Sequence[Any]) -> list[str | bytes]:
        flat: list[str | bytes] = []
        for (column, encode), value in zip(self._field_specs, row, strict=True):
            if value is not None:
                flat += (column, encode(value))
        # An entry needs a field: an all-null row keeps its first column, empty.
        return flat or [self.columns[0], ""]

    def _key(self, row: Sequence[Any]) -> str:
        assert self.settings.key is not None
        values: dict[str, str] = {}
        for (name, index), encode in zip(self._key_fields, self._key_text, strict=True):
            value = row[index]
            if value is None:
                shown = dict(zip(self.columns, row, strict=True))
                raise ValueError(
                    f"redis sink: key column {name!r} is null, so key template "
                    f"{self.settings.key!r} cannot name row {shown!r}"
                )
            part = encode(value)
            values[name] = part.decode("utf-8", "replace") if isinstance(part, bytes) else part
        return self.settings.key.format_map(values)


def _template_fields(template: str, columns: list[str]) -> list[tuple[str, int]]:
    """The columns a key template names, with their positions; errors name what is wrong."""
    try:
        pieces = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"option key does not parse: {template!r} ({exc})") from None
    names = [name for _, name, _, _ in pieces if name is not None]
    if not names:
        raise ValueError(f"option key must name a column, e.g. 'order:{{order_id}}': {template!r}")
    found: list[tuple[str, int]] = []
    for name in names:
        if name not in columns:
            raise ValueError(
                f"option key {template!r} names column {name!r}, which the DataFrame does not "
                f"have; columns: {', '.join(columns)}"
            )
        found.append((name, columns.index(name)))
    return found
