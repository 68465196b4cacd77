"""The sink SPI: exactly once keyed by the source record, defined once for every sink.

A sink that offers it (the ``redis`` sink, ``kafka-eos``, a sink of your own:
docs/writing-a-sink.md) writes each record a streaming source read at most once, whatever
micro-batch carries it, so a replay whose batches are cut differently (Spark's async
progress tracking re-plans the batches after the last offsets it wrote) neither loses nor
doubles a row. What such a sink and its queries agree on, and only here:

- **The source record.** Each row keeps the columns the source gave it: its *source
  partition*, where ids rise (the redis-stream source's ``stream_key``, a Kafka
  ``topic`` and ``partition``; none for a source of one stream, named :data:`ONE_STREAM`)
  and its *id* there (``stream_id``, an entry id ``<ms>-<seq>``; a Kafka ``offset``, a
  whole number). :data:`KEYED_SOURCES` names those columns per source format.
- **The options.** ``sourceIdColumn`` names the id column, ``sourceStreamColumn`` the
  partition's columns (comma-separated; a partition's name is their values joined by
  ``/``). :func:`source_fields` is their one parser; :func:`resolve` checks them against
  the rows' schema, or finds the source's own columns when none are named.
- **The marks.** A sink keeps, per source partition, its *mark*: the highest id it has
  committed (:data:`Mark`: an offset, or an entry id's ``(ms, seq)``). It commits a row's
  write and its partition's new mark atomically (one Redis script, one Kafka transaction,
  one line appended with its mark).
- **What a replay skips.** A row whose id is at or below its partition's mark was written
  and is skipped; a row above it is new (:func:`unwritten`). Rows of one partition must
  reach the sink in the source's order, in one task (no shuffle before the sink).

Pure functions over Arrow batches and plain values: no pyspark, no client. Errors a row
or an option causes are :class:`SourceNotKeyed` (a ``ValueError``), or the class a sink
passes as ``error``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from enrich._errors import EnrichError

ID_OPTION = "sourceIdColumn"
STREAM_OPTION = "sourceStreamColumn"
# Spark's query option; a sink keyed by batch id refuses it (a replay re-cuts batches).
ASYNC_OPTION = "asyncProgressTrackingEnabled"

# The columns each keyed source gives its rows: a partition's columns, then the id's.
STREAM_ID = "stream_id"  # redis-stream: the entry id
STREAM_KEY = "stream_key"  # redis-stream: the stream's key (a query reading several)
KAFKA_PARTITION = ("topic", "partition")  # Spark's kafka source
KAFKA_ID = "offset"
KEYED_SOURCES: Mapping[str, tuple[str, ...]] = {
    "redis-stream": (STREAM_ID,),
    "kafka": (*KAFKA_PARTITION, KAFKA_ID),
}
ONE_STREAM = "*"  # the source partition of rows that name none (one stream read)

# A Redis stream entry id as Redis writes it: no sign, no leading zeros.
ENTRY_ID = r"^(0|[1-9][0-9]*)-(0|[1-9][0-9]*)$"
_ENTRY_ID = re.compile(ENTRY_ID)
_WHOLE = ("bigint", "int", "smallint", "tinyint")  # Spark's simple names of offsets' types

Mark = int | tuple[int, int]


class SourceNotKeyed(EnrichError, ValueError):
    """The rows, or the options, do not name the source record each row comes from: the
    sink could not tell a replayed record from a new one (the message says what to keep)."""


class IdKind(enum.Enum):
    """How a source's ids compare: Kafka offsets (whole numbers) or entry ids."""

    OFFSET = "offset"
    ENTRY_ID = "entry id"


@dataclass(frozen=True)
class SourceFields:
    """The columns the options name (:func:`source_fields`): ``id``, and ``stream``, the
    partition's columns comma-separated ("" for one stream)."""

    id: str
    stream: str = ""

    @property
    def partition(self) -> tuple[str, ...]:
        """The partition's columns, in order (none for one stream)."""
        return tuple(name.strip() for name in self.stream.split(",") if name.strip())


@dataclass(frozen=True, kw_only=True)
class SourceColumns:
    """The columns naming each row's source record, checked against the rows' schema
    (:func:`resolve`).

    Attributes:
        partition: the columns whose values, joined by ``/``, name the source partition
            (empty: one stream, named :data:`ONE_STREAM`).
        id: the column of the offset or entry id, rising along each partition.
        kind: how ids compare.
    """

    partition: tuple[str, ...]
    id: str
    kind: IdKind

    def describe(self) -> str:
        where = ",".join(self.partition) or "(one stream)"
        return f"{self.kind.value}s in column {self.id!r} per {where}"


def source_fields(
    options: Mapping[str, Any], *, error: type[ValueError] = SourceNotKeyed
) -> SourceFields | None:
    """The columns named by ``sourceIdColumn`` / ``sourceStreamColumn`` (Spark's
    options, either case), or None when the first is not set.

    Raises:
        error: ``sourceStreamColumn`` without ``sourceIdColumn``, or a column named twice.
    """
    lowered = {str(k).lower(): v for k, v in options.items()}
    column = str(lowered.get(ID_OPTION.lower(), "")).strip()
    text = str(lowered.get(STREAM_OPTION.lower(), ""))
    names = [n.strip() for n in text.split(",") if n.strip()]
    stream = ",".join(names)
    if stream and not column:
        raise error(
            f"option {STREAM_OPTION} ({stream!r}) needs option {ID_OPTION}: the column "
            "holding each row's source entry id (the redis-stream source's stream_id, "
            "a kafka source's offset)"
        )
    if column in names:
        raise error(f"options {ID_OPTION} and {STREAM_OPTION} name the same column {column!r}")
    if len(set(names)) != len(names):
        raise error(f"option {STREAM_OPTION} names a column twice: {stream!r}")
    return SourceFields(column, stream) if column else None


def resolve(
    named: SourceFields | None,
    fields: Mapping[str, str],
    *,
    sink: str,
    error: type[ValueError] = SourceNotKeyed,
) -> SourceColumns:
    """The source columns of rows of ``fields`` (name -> Spark's simple type name): the
    ones ``named`` by the options, checked, or, when None, the source's own (a Kafka
    source's, else the redis-stream source's) found in ``fields``.

    Raises:
        error: a named column is missing, or not a string / whole number; or nothing
            is named and the rows carry no source's columns.
    """
    names = list(fields)
    if named is None:
        named = _found(fields)
    if named is None:
        raise error(
            f"the {sink} sink writes each source record once, keyed by where it was read: "
            "the rows need Kafka's topic, partition and offset columns (Spark's kafka "
            "source) or the redis-stream source's stream_id (and stream_key when it reads "
            f"several streams); these rows have {', '.join(names)}. Keep those columns "
            "through the query (lookup_join keeps every input column), or name them with "
            f"the options {ID_OPTION} and {STREAM_OPTION}"
        )
    named_columns = [(ID_OPTION, named.id)] + [(STREAM_OPTION, c) for c in named.partition]
    for option, column in named_columns:
        if column not in fields:
            raise error(
                f"option {option} names column {column!r}, which the DataFrame does not "
                f"have (columns: {', '.join(names)}). The redis-stream source gives the "
                "entry id in column stream_id when the schema names it, a kafka source "
                "topic, partition and offset; keep them through the query (do not drop "
                "or rename them)"
            )
        if fields[column] not in (*_WHOLE, "string"):
            raise error(
                f"option {option}: column {column!r} must be a string (an entry id "
                f"'<ms>-<seq>' or a stream key) or a whole number (a kafka offset or "
                f"partition), got {fields[column]}"
            )
    kind = IdKind.OFFSET if fields[named.id] in _WHOLE else IdKind.ENTRY_ID
    return SourceColumns(partition=named.partition, id=named.id, kind=kind)


def _found(fields: Mapping[str, str]) -> SourceFields | None:
    """The source's own columns in ``fields``: a Kafka source's, else redis-stream's."""
    if all(c in fields for c in KEYED_SOURCES["kafka"]):
        return SourceFields(KAFKA_ID, ",".join(KAFKA_PARTITION))
    if STREAM_ID in fields:
        return SourceFields(STREAM_ID, STREAM_KEY if STREAM_KEY in fields else "")
    return None


def is_source_id(value: Any) -> bool:
    """Whether ``value`` is a source id: an entry id's text or a whole number >= 0."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value >= 0
    return isinstance(value, str) and _ENTRY_ID.match(value) is not None


def valid_rows(batch: pa.RecordBatch, columns: SourceColumns) -> pa.Array:
    """Per row of ``batch``: its id is a source id and its partition's columns are not
    null (a boolean array, no nulls)."""
    import pyarrow.compute as pc  # here: the sinks' planner processes need none of it

    ids = batch.column(columns.id)
    if pa.types.is_integer(ids.type):
        valid = pc.fill_null(pc.greater_equal(ids, 0), False)
    else:
        valid = pc.fill_null(pc.match_substring_regex(ids, ENTRY_ID), False)
    for name in columns.partition:
        valid = pc.and_(valid, batch.column(name).is_valid())
    return valid


def checked(
    items: Iterator[Any],
    columns: SourceColumns,
    names: Sequence[str],
    *,
    sink: str,
    error: type[ValueError] = SourceNotKeyed,
) -> Iterator[Any]:
    """``items`` (Arrow batches, or rows of fields ``names``) as they are, after checking
    each row's source record (:func:`valid_rows`). A row without fails the task before
    the sink writes anything of the item, naming the column and the row."""
    import pyarrow.compute as pc

    where = list(names).index(columns.id)
    streams = [list(names).index(c) for c in columns.partition]
    for item in items:
        if isinstance(item, pa.RecordBatch):
            valid = valid_rows(item, columns)
            if not pc.all(valid).as_py():
                bad = pc.index(valid, False).as_py()
                _refuse(columns, item.slice(bad, 1).to_pylist()[0], sink=sink, error=error)
        elif not is_source_id(item[where]) or any(item[i] is None for i in streams):
            _refuse(columns, dict(zip(names, item, strict=True)), sink=sink, error=error)
        yield item


def _refuse(
    columns: SourceColumns, row: dict[str, Any], *, sink: str, error: type[ValueError]
) -> None:
    value = row[columns.id]
    if not is_source_id(value):
        what = (
            f"column {columns.id!r} ({ID_OPTION}) holds {value!r}, not an entry id "
            "'<ms>-<seq>' or an offset"
        )
    else:
        empty = next(c for c in columns.partition if row[c] is None)
        what = f"column {empty!r} ({STREAM_OPTION}) is null"
    raise error(
        f"{sink} sink: a row has no source record to be written once by: {what}; "
        f"row {str(row)[:300]}. Keep the source's columns (stream_id; a kafka "
        "source's topic, partition, offset) as they were read"
    )


def split(
    batch: pa.RecordBatch,
    columns: SourceColumns,
    *,
    sink: str,
    error: type[ValueError] = SourceNotKeyed,
) -> dict[str, pa.RecordBatch]:
    """The rows of ``batch`` per source partition (named by its columns' values joined
    by ``/``), in their order; every row checked first (:func:`checked`)."""
    import pyarrow.compute as pc

    for _ in checked(iter([batch]), columns, batch.schema.names, sink=sink, error=error):
        pass
    if not columns.partition:
        return {ONE_STREAM: batch}
    parts = [pc.cast(batch.column(c), pa.string()) for c in columns.partition]
    keys = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")
    distinct = pc.unique(keys).to_pylist()
    if len(distinct) == 1:
        return {distinct[0]: batch}
    return {key: batch.filter(pc.equal(keys, key)) for key in distinct}


def ids_of(batch: pa.RecordBatch, columns: SourceColumns) -> tuple[pa.Array, pa.Array | None]:
    """The ids of rows checked by :func:`checked`, as comparable integers: offsets, or
    entry ids' ms and seq parts."""
    import pyarrow.compute as pc

    ids = batch.column(columns.id)
    if columns.kind is IdKind.OFFSET:
        return pc.cast(ids, pa.int64()), None
    halves = pc.split_pattern(ids, "-")
    ms = pc.cast(pc.list_element(halves, 0), pa.int64())
    seq = pc.cast(pc.list_element(halves, 1), pa.int64())
    return ms, seq


def unwritten(
    batch: pa.RecordBatch, columns: SourceColumns, mark: Mark | None
) -> tuple[pa.RecordBatch, Mark | None]:
    """What a replay skips: the rows of one source partition above ``mark`` (all of them
    when None) are kept, the others were written; with the highest id among those kept
    (None when none is left), the partition's next mark."""
    import pyarrow.compute as pc

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


def mark_text(mark: Mark) -> str:
    """A mark as text: an offset's digits, or an entry id ``<ms>-<seq>``."""
    return str(mark) if isinstance(mark, int) else f"{mark[0]}-{mark[1]}"


def parse_mark(text: str) -> Mark:
    """The mark :func:`mark_text` wrote."""
    if re.fullmatch(r"[0-9]+", text):
        return int(text)
    ms, seq = text.split("-")
    return int(ms), int(seq)
