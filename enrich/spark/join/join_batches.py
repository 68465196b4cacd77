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

from ...engine.caller.wait import WaitIterator
from ...engine.records.arrow_types import arrow_schema
from ...engine.records.call_metrics import JoinMetrics, record_concurrency
from ...lookup.cache.full import FullCache
from ...lookup.cache.full_source import with_full_cache
from ...lookup.contract.lookup_source import LookupSource
from ...lookup.engines import columnar_lane
from ...lookup.iterators import join_chunks
from ...lookup.join_settings import DEFAULT_SPARK_CAPACITY as DEFAULT_SPARK_CAPACITY, JoinSettings
from ...lookup.lane.run import ColumnarLane
from ...lookup.outcome import ColumnarJoined, JoinedChunk
from ..metrics.metric_rows import observed_batches, report, run_of


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
        observed: the output carries the metrics column and each task's metrics row
            (:mod:`enrich.spark.metrics.metric_rows`), for ``DataFrame.observe``.
    """

    name: str
    source: LookupSource
    on: tuple[int, ...]
    columns: tuple[str, ...]
    settings: JoinSettings = field(default_factory=JoinSettings)
    accumulator: Any = None
    observed: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.settings.cache, FullCache):  # the snapshot answers every key
            object.__setattr__(self, "source", with_full_cache(self.source, self.settings.cache))
            object.__setattr__(self, "settings", self.settings.without_cache())

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

    def run(self, chunks: Iterable[tuple[Any, Sequence[Any]]]) -> WaitIterator:
        """The engine over ``chunks`` of ``(tag, keys)``: one JoinedChunk per chunk."""
        return join_chunks(chunks, self.source, self.settings)

    def lane(self, keys: pa.Array) -> ColumnarLane | None:
        """The columnar lane for key columns like ``keys``, or None when the join takes
        the per-row path: a composite key, a key type the lane does not take, a source
        without ``lookup_arrow``."""
        return columnar_lane(self.source, self.settings, keys, len(self.on))

    def report(self, run: WaitIterator | ColumnarLane) -> JoinMetrics | None:
        """Add the run's metrics to the accumulator (once per task), under
        ``(name, query id, batch id)`` (both None outside a streaming query), and to the
        driver's inbox (:mod:`enrich.spark.metrics.inbox`: Spark may never read the
        accumulator update of a task whose output it stopped reading); returns them
        (None when the run made none)."""
        if isinstance(run, ColumnarLane):
            metrics = run.metrics
        elif run.function is not None:
            metrics = run.function.statistics()
        else:
            return None
        record_concurrency(metrics, self.source)  # a store's adaptive limit, if any
        report(self.accumulator, self.name, metrics, run_of(self.accumulator))
        return metrics


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
    Chunks hold ``chunk_rows(capacity)`` rows; on the columnar lane (see
    :meth:`JoinPlan.lane`) they are joined with Arrow compute, otherwise row by row.
    Under ``plan.observed`` the batches have the metrics column (NULL), and the task's
    metrics row follows the last of them.
    """
    first_batch = next(batches, None)
    if first_batch is None:
        return
    batches = _prepend(first_batch, batches)
    schema = pa.schema([*first_batch.schema, *plan.arrow_fields()])

    def work(inputs: Iterator[pa.RecordBatch], done: list[JoinMetrics]) -> Iterator[pa.RecordBatch]:
        return _enrich(plan, inputs, first_batch, schema, done)

    if not plan.observed:
        yield from work(batches, [])
        return
    yield from observed_batches(batches, work, schema, plan.arrow_fields())


def _enrich(
    plan: JoinPlan,
    batches: Iterator[pa.RecordBatch],
    first_batch: pa.RecordBatch,
    schema: pa.Schema,
    done: list[JoinMetrics],
) -> Iterator[pa.RecordBatch]:
    """The joined batches; the run's metrics go to ``done`` when it ends."""
    size = plan.chunk_rows
    lane = plan.lane(first_batch.column(plan.on[0])) if first_batch.num_columns else None
    if lane is not None:
        yield from _enrich_columnar(plan, lane, batches, size, schema, done)
        return

    def chunks() -> Iterator[tuple[pa.RecordBatch, list[Any]]]:
        for batch in batches:
            for piece in _slices(batch, size):
                yield piece, keys_of(piece, plan.on)

    feed = chunks()
    first = next(feed, None)
    if first is None:
        return
    run = plan.run(_prepend(first, feed))
    try:
        for joined in run:
            if joined.indices:
                yield _joined_batch(plan, joined, schema)
    finally:
        run.close()
        _done(done, plan.report(run))


def _done(done: list[JoinMetrics], metrics: JoinMetrics | None) -> None:
    if metrics is not None:
        done.append(metrics)


def _joined_batch(plan: JoinPlan, joined: JoinedChunk, schema: pa.Schema) -> pa.RecordBatch:
    arrays = list(_take(joined.tag, joined.indices).columns)
    arrays += dimension_arrays(plan, joined.rows)
    if plan.with_error:
        arrays.append(pa.array(joined.errors, type=pa.string()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _enrich_columnar(
    plan: JoinPlan,
    lane: ColumnarLane,
    batches: Iterator[pa.RecordBatch],
    size: int,
    schema: pa.Schema,
    done: list[JoinMetrics],
) -> Iterator[pa.RecordBatch]:
    key = plan.on[0]

    def chunks() -> Iterator[tuple[pa.RecordBatch, pa.Array]]:
        for batch in batches:
            for piece in _slices(batch, size):
                yield piece, piece.column(key)

    run = lane.run(chunks())
    try:
        for joined in run:
            if isinstance(joined, JoinedChunk):
                if joined.indices:
                    yield _joined_batch(plan, joined, schema)
                continue
            yield from _columnar_batch(plan, joined, schema)
    finally:
        run.close()
        _done(done, plan.report(lane))


def _columnar_batch(
    plan: JoinPlan, joined: ColumnarJoined, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    batch: pa.RecordBatch = joined.tag
    structs = joined.structs
    if joined.keep is not None:
        batch = batch.filter(joined.keep)
        structs = structs.filter(joined.keep)
    if batch.num_rows == 0:
        return
    arrays = [*batch.columns, *structs.flatten()]
    if plan.with_error:
        arrays.append(pa.nulls(batch.num_rows, pa.string()))
    yield pa.RecordBatch.from_arrays(arrays, schema=schema)


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
    first_input = next(inputs, None)
    if first_input is None:
        return
    inputs = _prepend(first_input, inputs)
    single = first_input[0] if _is_one_array(first_input) else first_input
    lane = plan.lane(single) if isinstance(single, pa.Array) else None
    if lane is not None:
        arrays = (a[0] if _is_one_array(a) else a for a in inputs)
        yield from _structs_columnar(plan, lane, arrays, size, struct_type)
        return

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


def _is_one_array(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], pa.Array)


def _structs_columnar(
    plan: JoinPlan,
    lane: ColumnarLane,
    inputs: Iterator[Any],
    size: int,
    struct_type: pa.DataType,
) -> Iterator[pa.Array]:
    def chunks() -> Iterator[tuple[tuple[int, bool], pa.Array]]:
        for keys in inputs:
            if not len(keys):  # an empty batch still needs its (empty) answer, in its place
                yield (0, True), keys
            for start in range(0, len(keys), size):
                part = keys.slice(start, size)
                yield (len(part), start + size >= len(keys)), part

    run = lane.run(chunks())
    pieces: list[pa.Array] = []
    try:
        for joined in run:
            length, last = joined.tag
            if isinstance(joined, JoinedChunk):
                pieces.append(_structs(plan, struct_type, joined, length))
            else:
                structs = joined.structs
                arrays = list(structs.flatten())
                if plan.with_error:
                    arrays.append(pa.nulls(length, pa.string()))
                pieces.append(
                    pa.StructArray.from_arrays(
                        arrays, fields=list(struct_type), mask=structs.is_null()
                    )
                )
            if last:
                yield pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
                pieces = []
    finally:
        run.close()
        plan.report(lane)


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
