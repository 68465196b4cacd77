"""The executor side of Spark lookups: Arrow batches in, enriched Arrow batches out.

Runs in Spark's Python workers and imports no pyspark (only pyarrow), so it can be
tested like the rest of the engine. One partition (or one task's share of an SQL
function's input) is one run of :func:`enrich.lookup_chunks`: each input batch is cut
into chunks of ``plan.chunk_rows`` rows, fed to the operator lazily (at
most ``capacity`` rows in flight), and each joined chunk becomes an output batch as soon
as it comes back (pipelined). A chunk's tag is its slice of the input batch, so an input
batch is released once its last chunk is out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..engine.wait import AsyncWaitIterator
from ..lookup.arrow_types import arrow_schema
from ..lookup.iterators import join_chunks
from ..lookup.joined import JoinedChunk
from ..lookup.settings import JoinSettings
from ..lookup.source import LookupSource


@dataclass(frozen=True)
class JoinPlan:
    """Everything a worker needs to run one lookup; picklable, built on the driver.

    Attributes:
        name: the join's name (its metrics are registered under it).
        source: the dimension store.
        on: the key columns' positions in the input batches (several: a composite key).
        columns: the names of the dimension columns added (prefix included).
        settings: the join's settings, validated once on the driver and used as they are.
        accumulator: where a task adds its metrics (a pyspark Accumulator, or anything
            with ``add({(name, query_id, batch_id): JoinMetrics})``), or None.
    """

    name: str
    source: LookupSource
    on: tuple[int, ...]
    columns: tuple[str, ...]
    settings: JoinSettings = field(default_factory=JoinSettings)
    accumulator: Any = None

    @property
    def with_error(self) -> bool:
        return self.settings.with_error

    @property
    def error_column(self) -> str:
        return self.settings.error_column

    @property
    def chunk_rows(self) -> int:
        """Rows per chunk (derived from the settings' capacity)."""
        return self.settings.chunk_rows

    def arrow_fields(self) -> list[pa.Field]:
        """The Arrow fields the lookup adds: the dimension columns, then the reason."""
        fields = list(arrow_schema(self.source.schema, self.columns))
        if self.with_error:
            fields.append(pa.field(self.error_column, pa.string()))
        return fields

    def run(self, chunks: Iterable[tuple[Any, Sequence[Any]]]) -> AsyncWaitIterator:
        """The engine over ``chunks`` of ``(tag, keys)``: one JoinedChunk per chunk."""
        return join_chunks(chunks, self.source, self.settings)

    def report(self, run: AsyncWaitIterator) -> None:
        """Add the run's metrics to the accumulator (once per task), under
        ``(name, query id, batch id)`` (both None outside a streaming query)."""
        if self.accumulator is not None and run.function is not None:
            query, batch = _micro_batch()
            self.accumulator.add({(self.name, query, batch): run.function.statistics()})


def _micro_batch() -> tuple[str | None, int | None]:
    """The streaming query id and micro-batch id of the running Spark task, if any."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - always there inside Spark
        return None, None
    context = TaskContext.get()
    if context is None:
        return None, None
    query = context.getLocalProperty("sql.streaming.queryId")
    batch = context.getLocalProperty("streaming.sql.batchId")
    return query, int(batch) if batch is not None else None


def keys_of(batch: pa.RecordBatch, on: Sequence[int]) -> list[Any]:
    """The lookup keys of a batch's rows: scalars, or tuples for several columns (None
    when any part is null)."""
    if len(on) == 1:
        return batch.column(on[0]).to_pylist()  # type: ignore[no-any-return]
    parts = [batch.column(i).to_pylist() for i in on]
    return [None if None in key else key for key in zip(*parts, strict=True)]


def _slices(batch: pa.RecordBatch, size: int) -> Iterator[pa.RecordBatch]:
    for start in range(0, batch.num_rows, size):
        yield batch.slice(start, size)


def dimension_arrays(plan: JoinPlan, rows: Sequence[tuple[Any, ...] | None]) -> list[pa.Array]:
    """One Arrow array per dimension field; a None row gives nulls."""
    types = [f.type for f in arrow_schema(plan.source.schema)]
    if not rows:
        return [pa.array([], type=t) for t in types]
    if None in rows:
        blank = (None,) * len(types)
        rows = [blank if r is None else r for r in rows]
    return [
        pa.array(values, type=t) for values, t in zip(zip(*rows, strict=True), types, strict=True)
    ]


def _take(batch: pa.RecordBatch, indices: list[int]) -> pa.RecordBatch:
    if indices == list(range(batch.num_rows)):
        return batch
    return batch.take(pa.array(indices, type=pa.int64()))


def enrich_batches(plan: JoinPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The mapInArrow function: the input rows joined with their dimension rows.

    An output batch is yielded per joined chunk, as soon as it completes (in input order
    under ORDERED). An empty partition yields nothing and never touches the source.
    """
    size = plan.chunk_rows

    def chunks() -> Iterator[tuple[pa.RecordBatch, list[Any]]]:
        for batch in batches:
            for piece in _slices(batch, size):
                yield piece, keys_of(piece, plan.on)

    feed = chunks()
    first = next(feed, None)
    if first is None:
        return
    run = plan.run(_prepend(first, feed))
    extra = plan.arrow_fields()
    schema = pa.schema([*first[0].schema, *extra])
    try:
        for joined in run:
            if not joined.indices:
                continue
            arrays = list(_take(joined.tag, joined.indices).columns)
            arrays += dimension_arrays(plan, joined.rows)
            if plan.with_error:
                arrays.append(pa.array(joined.errors, type=pa.string()))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    finally:
        run.close()
        plan.report(run)


def _prepend(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def lookup_structs(
    plan: JoinPlan, inputs: Iterator[pa.Array | tuple[pa.Array, ...]]
) -> Iterator[pa.Array]:
    """The SQL function: per input batch of key arrays, one struct per row, NULL when the
    key found nothing (or its lookup failed, under ``on_error="null"``). A key with
    several rows gives its first. Needs ``plan.settings.how == "left"`` and ORDERED (the struct
    array lines up with its input rows)."""
    size = plan.chunk_rows
    struct_type = pa.struct(plan.arrow_fields())

    def chunks() -> Iterator[tuple[tuple[int, bool], list[Any]]]:
        for arrays in inputs:
            columns = arrays if isinstance(arrays, tuple) else (arrays,)
            batch = pa.RecordBatch.from_arrays(
                list(columns), names=[f"k{i}" for i in range(len(columns))]
            )
            keys = keys_of(batch, range(len(columns)))
            if not keys:  # an empty batch still needs its (empty) answer, in its place
                yield (0, True), []
            for start in range(0, len(keys), size):
                part = keys[start : start + size]
                yield (len(part), start + size >= len(keys)), part

    run = plan.run(chunks())
    pieces: list[pa.Array] = []
    try:
        for joined in run:
            length, last = joined.tag
            pieces.append(_structs(plan, struct_type, joined, length))
            if last:
                yield pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
                pieces = []
    finally:
        run.close()
        plan.report(run)


def _structs(plan: JoinPlan, struct_type: pa.DataType, joined: JoinedChunk, length: int) -> Any:
    rows: list[tuple[Any, ...] | None] = [None] * length
    errors: list[str | None] = [None] * length
    seen = [False] * length
    for n, index in enumerate(joined.indices):
        if not seen[index]:  # a 1:N key: its first row
            seen[index] = True
            rows[index] = joined.rows[n]
            if joined.errors is not None:
                errors[index] = joined.errors[n]
    if not length:
        return pa.array([], type=struct_type)
    arrays = dimension_arrays(plan, rows)
    if plan.with_error:
        arrays.append(pa.array(errors, type=pa.string()))
    # NULL when nothing was found and there is no reason to report.
    mask = pa.array([r is None and e is None for r, e in zip(rows, errors, strict=True)])
    return pa.StructArray.from_arrays(arrays, fields=list(struct_type), mask=mask)


def lookup_structs_for(plan: JoinPlan) -> Callable[[Iterator[Any]], Iterator[pa.Array]]:
    """``lookup_structs`` bound to ``plan`` (what Spark pickles for the SQL function)."""

    def structs(inputs: Iterator[Any]) -> Iterator[pa.Array]:
        return lookup_structs(plan, inputs)

    return structs
