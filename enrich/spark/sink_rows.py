"""Rows to Redis writes: the options of the ``redis`` sink and how each row is written.

A row becomes one operation, a list ``[kind, key, *arguments]`` of strings:

- ``["x", stream, field, value, ...]``: append an entry to a stream (``XADD *``);
- ``["h", key, field, value, ...]``: replace a hash (``DEL`` then ``HSET``);
- ``["s", key, json]``: set a string key to the row as a JSON object.

Null columns are left out of entries and hashes (Redis has no null); JSON keeps them as
``null``. Values are written as text: booleans as ``true``/``false``, floats with
``repr`` (round-trips), dates and timestamps in ISO 8601, binary as UTF-8. Rows whose
error column (``lookup_join(..., on_error="error_column")``) is set go to the
``dead_letter`` stream instead, when one is configured.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from . import redis_options

FORMAT = "redis"
DEFAULT_ERROR_COLUMN = "enrich_error"
DEFAULT_STAGING_TTL = 7 * 24 * 3600  # seconds a crashed attempt's staging may linger


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
            f"value={self.value!r}, mode={self.mode.value!r}, dead_letter={self.dead_letter!r})"
        )


def text(value: Any) -> str:
    """A column value as the text Redis stores."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, int):
        return str(value)
    return json.dumps(_plain(value), default=str)


def _plain(value: Any) -> Any:
    if hasattr(value, "asDict"):  # a nested Row
        return value.asDict(recursive=True)
    return value


class RowEncoder:
    """Turns rows of one schema into operations (see the module docstring)."""

    def __init__(self, settings: SinkSettings, columns: Sequence[str]) -> None:
        self.settings = settings
        self.columns = list(columns)
        self._error = (
            self.columns.index(settings.error_column)
            if settings.dead_letter and settings.error_column in self.columns
            else None
        )
        self._key_fields: list[tuple[str, int]] = []
        if settings.key is not None:
            self._key_fields = _template_fields(settings.key, self.columns)

    def encode(self, row: Sequence[Any]) -> list[str]:
        """The operation writing ``row``.

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
            document = {c: _plain(v) for c, v in zip(self.columns, row, strict=True)}
            return ["s", key, json.dumps(document, default=text)]
        return ["h", key, *self._fields(row)]

    def _fields(self, row: Sequence[Any]) -> list[str]:
        flat: list[str] = []
        for column, value in zip(self.columns, row, strict=True):
            if value is not None:
                flat += (column, text(value))
        # An entry needs a field: an all-null row keeps its first column, empty.
        return flat or [self.columns[0], ""]

    def _key(self, row: Sequence[Any]) -> str:
        assert self.settings.key is not None
        values: dict[str, str] = {}
        for name, index in self._key_fields:
            if row[index] is None:
                shown = dict(zip(self.columns, row, strict=True))
                raise ValueError(
                    f"redis sink: key column {name!r} is null, so key template "
                    f"{self.settings.key!r} cannot name row {shown!r}"
                )
            values[name] = text(row[index])
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
