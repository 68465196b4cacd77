"""Each row's source record, and the marks that tell a written record from a new one
(pure functions over Arrow batches: no client, no Spark task).

A *source partition* is where the source's offsets grow: a Kafka ``topic/partition``
(Spark's Kafka source gives each row ``topic``, ``partition``, ``offset``) or a Redis
stream (the redis-stream source's ``stream_key``, ``stream_id``: an entry id
``<ms>-<seq>``). A *mark* is the highest offset of a source partition that a committed
transaction of the sink holds. A row is new when its offset is above its partition's
mark; a replayed or re-cut batch's rows at or below it were written and are skipped.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .eos_errors import SourceNotKeyed
from .settings import KafkaSinkSettings

KAFKA_COLUMNS = ("topic", "partition")
KAFKA_ID = "offset"
STREAM_COLUMNS = ("stream_key",)
STREAM_ID = "stream_id"
ONE_STREAM = "*"  # the source partition of rows that name no stream (one stream read)
ENTRY_ID = r"^(0|[1-9][0-9]*)-(0|[1-9][0-9]*)$"
MAX_ID_LENGTH = 200  # transactional ids past this keep a hash of the source's name

Mark = int | tuple[int, int]


class IdKind(enum.Enum):
    """How a source's ids compare: Kafka offsets (whole numbers) or entry ids."""

    OFFSET = "offset"
    ENTRY_ID = "entry id"


@dataclass(frozen=True, kw_only=True)
class SourceColumns:
    """The columns naming each row's source record.

    Attributes:
        partition: the columns whose values, joined by ``/``, name the source partition
            (empty: one stream, named ``*``).
        id: the column of the offset or entry id, rising along each partition.
        kind: how ids compare.
    """

    partition: tuple[str, ...]
    id: str
    kind: IdKind

    def describe(self) -> str:
        where = ",".join(self.partition) or "(one stream)"
        return f"{self.kind.value}s in column {self.id!r} per {where}"


def resolve(settings: KafkaSinkSettings, fields: dict[str, str]) -> SourceColumns:
    """The source columns, from the options or found in the rows' ``fields`` (name ->
    Spark simple type name).

    Raises:
        SourceNotKeyed: no source columns, or of the wrong type.
    """
    names = list(fields)
    if settings.source_id is not None:
        partition = settings.source_stream or ()
        columns = (*partition, settings.source_id)
        missing = [c for c in columns if c not in fields]
        if missing:
            raise SourceNotKeyed(
                f"the kafka-eos sink's source columns {missing} are not in the rows "
                f"(columns: {', '.join(names)}): keep the source's columns through the query"
            )
        kind = _kind(settings.source_id, fields[settings.source_id])
        return SourceColumns(partition=partition, id=settings.source_id, kind=kind)
    if all(c in fields for c in (*KAFKA_COLUMNS, KAFKA_ID)):
        return SourceColumns(
            partition=KAFKA_COLUMNS, id=KAFKA_ID, kind=_kind(KAFKA_ID, fields[KAFKA_ID])
        )
    if STREAM_ID in fields:
        partition = STREAM_COLUMNS if STREAM_COLUMNS[0] in fields else ()
        return SourceColumns(
            partition=partition, id=STREAM_ID, kind=_kind(STREAM_ID, fields[STREAM_ID])
        )
    raise SourceNotKeyed(
        "the kafka-eos sink writes each source record once, keyed by where it was read: "
        "the rows need Kafka's topic, partition and offset columns (Spark's kafka source) "
        "or the redis-stream source's stream_id (and stream_key when it reads several "
        f"streams); these rows have {', '.join(names)}. Keep those columns through the "
        "query (lookup_join keeps every input column), or name them with the options "
        "sourceIdColumn and sourceStreamColumn"
    )


def _kind(column: str, simple: str) -> IdKind:
    if simple in ("bigint", "int", "smallint", "tinyint"):
        return IdKind.OFFSET
    if simple == "string":
        return IdKind.ENTRY_ID
    raise SourceNotKeyed(
        f"the kafka-eos sink's source id column {column!r} must hold offsets (a whole "
        f"number) or entry ids (a string '<ms>-<seq>'), got {simple}"
    )


def split(batch: pa.RecordBatch, columns: SourceColumns) -> dict[str, pa.RecordBatch]:
    """The rows of ``batch`` per source partition, in their order.

    Raises:
        SourceNotKeyed: a row has a null source column.
    """
    for name in (*columns.partition, columns.id):
        if batch.column(name).null_count:
            raise SourceNotKeyed(
                f"kafka-eos sink: a row has a null {name!r}, so no source record to be "
                "written once by; keep the source's columns as they were read"
            )
    if not columns.partition:
        return {ONE_STREAM: batch}
    parts = [pc.cast(batch.column(c), pa.string()) for c in columns.partition]
    keys = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")
    distinct = pc.unique(keys).to_pylist()
    if len(distinct) == 1:
        return {distinct[0]: batch}
    return {key: batch.filter(pc.equal(keys, key)) for key in distinct}


def ids_of(batch: pa.RecordBatch, columns: SourceColumns) -> tuple[pa.Array, pa.Array | None]:
    """The ids as comparable integers: offsets, or entry ids' ms and seq parts.

    Raises:
        SourceNotKeyed: an offset below 0 or an id not of the form ``<ms>-<seq>``.
    """
    ids = batch.column(columns.id)
    if columns.kind is IdKind.OFFSET:
        ids = pc.cast(ids, pa.int64())
        if len(ids) and pc.min(ids).as_py() < 0:
            raise SourceNotKeyed(f"kafka-eos sink: column {columns.id!r} holds an offset below 0")
        return ids, None
    valid = pc.match_substring_regex(ids, ENTRY_ID)
    if not pc.all(valid).as_py():
        bad = ids[pc.index(valid, False).as_py()].as_py()
        raise SourceNotKeyed(
            f"kafka-eos sink: column {columns.id!r} holds {bad!r}, not an entry id '<ms>-<seq>'"
        )
    halves = pc.split_pattern(ids, "-")
    ms = pc.cast(pc.list_element(halves, 0), pa.int64())
    seq = pc.cast(pc.list_element(halves, 1), pa.int64())
    return ms, seq


def unwritten(
    batch: pa.RecordBatch, columns: SourceColumns, mark: Mark | None
) -> tuple[pa.RecordBatch, Mark | None]:
    """The rows of one source partition above ``mark`` (all of them when None), and the
    highest id among them (None when none is left)."""
    major, minor = ids_of(batch, columns)
    if mark is None:
        keep = None
    elif minor is None:
        keep = pc.greater(major, pa.scalar(int(mark), pa.int64()))  # type: ignore[arg-type]
    else:
        ms, seq = mark  # type: ignore[misc]
        keep = pc.or_(
            pc.greater(major, pa.scalar(ms, pa.int64())),
            pc.and_(
                pc.equal(major, pa.scalar(ms, pa.int64())),
                pc.greater(minor, pa.scalar(seq, pa.int64())),
            ),
        )
    if keep is not None:
        batch = batch.filter(keep)
        major = major.filter(keep)
        minor = minor.filter(keep) if minor is not None else None
    if not len(batch):
        return batch, None
    if minor is None:
        return batch, int(pc.max(major).as_py())
    top = pc.max(major).as_py()
    return batch, (int(top), int(pc.max(minor.filter(pc.equal(major, top))).as_py()))


def higher(a: Mark | None, b: Mark | None) -> Mark | None:
    """The later of two marks (None is before every mark)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b  # type: ignore[operator]


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
    text = str(mark) if isinstance(mark, int) else f"{mark[0]}-{mark[1]}"
    return json.dumps({"mark": text, "batch": batch}).encode()


def decode_mark(value: bytes | None) -> Mark | None:
    """A mark record's value (None: a tombstone or no record)."""
    if not value:
        return None
    text = str(json.loads(value)["mark"])
    if re.fullmatch(r"[0-9]+", text):
        return int(text)
    ms, seq = text.split("-")
    return int(ms), int(seq)
