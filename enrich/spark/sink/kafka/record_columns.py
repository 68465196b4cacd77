"""Rows to Kafka records by Spark's Kafka sink's conventions: which columns make a
record, checked once on the driver (:func:`plan`), and each Arrow batch's records
(:func:`records`).

A row's columns, as Spark's own sink reads them (any other column is ignored):

- ``value``: string or binary (required; null writes a record with a null value, a
  tombstone on a compacted topic), unless the option ``valueColumns`` names the
  columns to encode as a JSON object instead;
- ``key``: string or binary, optional (null: no key);
- ``topic``: string, the record's topic when the ``topic`` option is not set;
- ``partition``: int, optional (null: the partitioner decides, from the key);
- ``headers``: ``array<struct<key: string, value: binary>>``, optional.

Pure functions over Arrow batches and Spark's simple type names: no pyspark, no client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .alo_errors import KafkaAloRefused
from .alo_settings import ALL, AloSettings

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "headers")
_BYTES = ("string", "binary")
_WHOLE = ("int", "smallint", "tinyint")
_HEADERS = ("array<struct<key:string,value:binary>>", "array<struct<key:string,value:string>>")
UNASSIGNED = -1  # confluent-kafka's "no partition given": the partitioner picks one

Record = tuple[str, Any, Any, int, Any]  # topic, value, key, partition, headers


@dataclass(frozen=True, kw_only=True)
class RecordColumns:
    """Which columns make each record (see the module docstring).

    Attributes:
        topic: the target topic for every row, or None (each row's ``topic`` column).
        value: the column holding the value, or None when ``json`` names the columns
            encoded as the value.
        json: the columns of the value's JSON object, or None.
        key, partition, headers: whether the rows have those columns.
    """

    topic: str | None
    value: str | None
    json: tuple[str, ...] | None = None
    key: bool = False
    partition: bool = False
    headers: bool = False


def plan(fields: Mapping[str, str], settings: AloSettings) -> RecordColumns:
    """The record columns of rows of ``fields`` (name -> Spark's simple type name).

    Raises:
        KafkaAloRefused: a Kafka column of the wrong type, no ``value`` column (nor
            ``valueColumns``), no topic, or ``valueColumns`` naming a missing column.
    """
    names = ", ".join(fields)
    for column, allowed in (
        ("key", _BYTES),
        ("value", _BYTES),
        ("topic", ("string",)),
        ("partition", _WHOLE),
        ("headers", _HEADERS),
    ):
        if column in fields and fields[column] not in allowed:
            raise KafkaAloRefused(
                f"the kafka-alo sink reads column {column!r} as each record's {column} "
                f"(Spark's Kafka sink's convention): it must be {' or '.join(allowed)}, "
                f"got {fields[column]}; cast it, or rename the column if it means "
                "something else"
            )
    json = None
    if settings.value_columns is not None:
        json = settings.value_columns
        if json == (ALL,):
            json = tuple(c for c in fields if c not in KAFKA_COLUMNS)
        missing = [c for c in json if c not in fields]
        if missing or not json:
            raise KafkaAloRefused(
                f"option valueColumns names column(s) {', '.join(map(repr, missing))} the "
                f"rows do not have (columns: {names})"
                if missing
                else f"option valueColumns '*' leaves no column to write (columns: {names})"
            )
    elif "value" not in fields:
        raise KafkaAloRefused(
            "the kafka-alo sink writes column 'value' (string or binary) as each "
            f"record's value, and the rows have no such column (columns: {names}): build "
            "it (to_json(struct(...)) for JSON), or name the columns to encode as a JSON "
            'value with .option("valueColumns", "a,b,...")'
        )
    if settings.topic is None and "topic" not in fields:
        raise KafkaAloRefused(
            'the kafka-alo sink needs a topic: .option("topic", ...), or a string column '
            f"'topic' naming each row's (columns: {names})"
        )
    return RecordColumns(
        topic=settings.topic,
        value=None if json is not None else "value",
        json=json,
        key="key" in fields,
        partition="partition" in fields,
        headers="headers" in fields,
    )


def records(batch: pa.RecordBatch, columns: RecordColumns) -> Iterator[Record]:
    """The records of ``batch``, in its order.

    Raises:
        KafkaAloRefused: a row's topic is null and no ``topic`` option is set.
    """
    n = batch.num_rows
    if columns.json is not None:
        values: list[Any] = json_values(batch, columns.json)
    else:
        values = batch.column(columns.value).to_pylist()
    nothing: list[Any] = [None] * n
    keys = batch.column("key").to_pylist() if columns.key else nothing
    if columns.topic is not None:
        topics: list[Any] = [columns.topic] * n
    else:
        topics = batch.column("topic").to_pylist()
        if None in topics:
            row = topics.index(None)
            raise KafkaAloRefused(
                f"kafka-alo sink: column 'topic' is null in a row and no topic option is "
                f"set (row {str(batch.slice(row, 1).to_pylist()[0])[:300]}): fill the "
                'column, or set .option("topic", ...) for every row'
            )
    if columns.partition:
        parts = [UNASSIGNED if p is None else p for p in batch.column("partition").to_pylist()]
    else:
        parts = [UNASSIGNED] * n
    if columns.headers:
        headers = [_headers(h) for h in batch.column("headers").to_pylist()]
    else:
        headers = nothing
    return zip(topics, values, keys, parts, headers, strict=True)


def _headers(pairs: list[dict[str, Any]] | None) -> list[tuple[str, Any]] | None:
    if not pairs:
        return None
    return [(pair["key"], pair["value"]) for pair in pairs]


def json_values(batch: pa.RecordBatch, names: tuple[str, ...]) -> list[bytes]:
    """Each row of ``batch``'s columns ``names`` as a JSON object (UTF-8): JSON's types
    as they are, timestamps and dates in ISO 8601, other values as their text."""
    dumps = _dumps()
    return [dumps(row) for row in batch.select(list(names)).to_pylist()]


def _dumps() -> Callable[[Any], bytes]:
    try:
        import orjson
    except ImportError:  # the "fast" extra not installed
        import json

        def dumps(row: Any) -> bytes:
            text = json.dumps(row, default=_text, separators=(",", ":"), ensure_ascii=False)
            return text.encode()

        return dumps
    return lambda row: orjson.dumps(row, default=_text)


def _text(value: Any) -> str:
    isoformat = getattr(value, "isoformat", None)
    return str(isoformat()) if isoformat is not None else str(value)
