"""The kafka-eos sink's side of exactly once keyed by the source record: its transactional
ids and the marks' records in the marks topic (pure functions: no client, no Spark task).

Source partitions, marks and what a replay skips are the sink SPI's
(:mod:`enrich.spark.sink.sink_spi`), re-exported here for the sink's modules: a Kafka
transaction holds one source partition's rows above its mark, and the mark's new value.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

from ..sink_spi import (
    KAFKA_ID as KAFKA_ID,
    ONE_STREAM as ONE_STREAM,
    IdKind as IdKind,
    Mark as Mark,
    SourceColumns as SourceColumns,
    higher as higher,
    mark_text,
    parse_mark,
    resolve as _resolve,
    split as _split,
    unwritten as unwritten,
)
from .eos_errors import SourceNotKeyed
from .settings import KafkaSinkSettings

MAX_ID_LENGTH = 200  # transactional ids past this keep a hash of the source's name


def resolve(settings: KafkaSinkSettings, fields: dict[str, str]) -> SourceColumns:
    """The source columns, from the options or found in the rows' ``fields`` (name ->
    Spark simple type name): :func:`enrich.spark.sink.sink_spi.resolve`.

    Raises:
        SourceNotKeyed: no source columns, or of the wrong type.
    """
    return _resolve(settings.source, fields, sink="kafka-eos", error=SourceNotKeyed)


def split(batch: Any, columns: SourceColumns) -> dict[str, Any]:
    """The rows of ``batch`` per source partition, in their order
    (:func:`enrich.spark.sink.sink_spi.split`).

    Raises:
        SourceNotKeyed: a row has no source record (a null column, a bad id).
    """
    return _split(batch, columns, sink="kafka-eos", error=SourceNotKeyed)


def transactional_id(prefix: str, identity: str, source: str) -> str:
    """The producer's ``transactional.id`` for one source partition of one sink: the
    same for every attempt of every run of the query (so attempts fence each other and
    a restart aborts what a dead run left open), different for every other partition
    and sink."""
    name = f"{prefix}-{identity}-{source}"
    if len(name) <= MAX_ID_LENGTH:
        return name
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    return f"{name[: MAX_ID_LENGTH - 17]}~{digest}"


def mark_key(identity: str, source: str) -> bytes:
    """The key of a source partition's mark in the marks topic (compacted: the latest
    committed record per key is the mark)."""
    return f"{identity}|{source}".encode()


def mark_partition(key: bytes, partitions: int) -> int:
    """The marks topic's partition holding ``key``'s marks (fixed, so one partition is
    read to find them)."""
    return zlib.crc32(key) % partitions


def encode_mark(mark: Mark, batch: Any) -> bytes:
    return json.dumps({"mark": mark_text(mark), "batch": batch}).encode()


def decode_mark(value: bytes | None) -> Mark | None:
    """A mark record's value (None: a tombstone or no record)."""
    if not value:
        return None
    return parse_mark(str(json.loads(value)["mark"]))
