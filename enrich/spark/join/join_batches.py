"""The executor side of Spark lookups: Arrow batches in, enriched Arrow batches out.

Runs in Spark's Python workers and imports no pyspark (only pyarrow), so it can be
tested like the rest of the engine. One partition (or one task's share of an SQL
function's input) is one run of the engine :func:`~enrich.lookup.engines.engine_for`
picks for its first batch's keys (a :class:`~enrich.lookup.interface.JoinEngine`): each
input batch is cut into chunks of ``plan.chunk_rows`` rows, fed to the engine lazily (at
most ``capacity`` rows in flight), and each joined chunk becomes an output batch as soon
as it comes back (pipelined), built from its Arrow form whichever engine joined it. A
chunk's tag is its slice of the input batch, so an input batch is released once its
last chunk is out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...engine.records.arrow_types import arrow_schema
from ...engine.records.call_metrics import JoinMetrics
from ...lookup.contract.lookup_source import LookupSource
from ...lookup.engines import engine_for
from ...lookup.interface import ArrowJoined, JoinEngine, joined_batches
from ...lookup.join_settings import DEFAULT_SPARK_CAPACITY as DEFAULT_SPARK_CAPACITY, JoinSettings
from ..metrics.metric_rows import observed_batches, report, run_of, snapshot


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
    # Derived once, where the plan is built (the driver), and pickled with it.
    _added: tuple[pa.Field, ...] = field(init=False, repr=False, compare=False)
    _struct: pa.StructType = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        added = list(arrow_schema(self.source.schema, self.columns))
        if self.with_error:
            added.append(pa.field(self.error_column, pa.string()))
        object.__setattr__(self, "_added", tuple(added))
        object.__setattr__(self, "_struct", pa.struct(list(arrow_schema(self.source.schema))))

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
        return list(self._added)

    @property
    def struct_type(self) -> pa.StructType:
        """The Arrow struct of the dimension's fields, by their own names (a prefix
        renames the output columns only)."""
        return self._struct

    def engine(self, columns: Sequence[pa.Array]) -> JoinEngine:
        """The engine for key columns like ``columns`` (the first batch's; none: the
        per-row engine): the columnar lane for one integer or string column from a
        source with ``lookup_arrow``, the per-row engine otherwise."""
        first = columns[0] if columns else None
        return engine_for(self.source, self.settings, first, len(columns))

    def output(
        self, rows: pa.RecordBatch, arrow: ArrowJoined, schema: pa.Schema
    ) -> pa.RecordBatch | None:
        """The output batch of a joined chunk: its input ``rows`` the output rows come
        from, the dimension columns and (``with_error``) the reason; None when no row is
        left."""
        if rows.num_rows == 0:
            return None
        arrays = [*rows.columns, *arrow.structs.flatten()]
        if self.with_error:
            errors = arrow.errors
            arrays.append(errors if errors is not None else pa.nulls(rows.num_rows, pa.string()))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def report(self, engine: JoinEngine, run: Any = None) -> JoinMetrics:
        """Add the engine's metrics to the accumulator (once per task), under
        ``(name, query id, batch id)`` (both None outside a streaming query), and to the
        driver's inbox through ``run`` (the task run's reports, :func:`run_of`; made here
        if None): Spark may never read the accumulator update of a task whose output it
        stopped reading (:mod:`enrich.spark.metrics.inbox`); returns them."""
        metrics = engine.statistics()  # with the store's adaptive limit, if any
        report(self.accumulator, self.name, metrics, run or run_of(self.accumulator))
        return metrics


def enrich_batches(plan: JoinPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The mapInArrow function: the input rows joined with their dimension rows.

    An output batch is yielded per joined chunk, as soon as it completes (in input order
    under ORDERED). An empty partition yields nothing and never touches the source.
    Chunks hold ``chunk_rows(capacity)`` rows; on the columnar lane (see
    :meth:`JoinPlan.engine`) they are joined with Arrow compute, otherwise row by row.
    Under ``plan.observed`` the batches have the metrics column (NULL), and the task's
    metrics row follows the last of them.
    """
    first_batch = next(batches, None)
    if first_batch is None:
        return
    batches = _prepend(first_batch, batches)
    keys = [first_batch.column(i) for i in plan.on] if first_batch.num_columns else []
    engine = plan.engine(keys)
    added = plan.arrow_fields()
    schema = pa.schema([*first_batch.schema, *added])

    def work(inputs: Iterator[pa.RecordBatch], done: list[JoinMetrics]) -> Iterator[pa.RecordBatch]:
        return _enrich(plan, engine, inputs, schema, done)

    if not plan.observed:
        yield from work(batches, [])
        return
    yield from observed_batches(batches, work, schema, added)


def _enrich(
    plan: JoinPlan,
    engine: JoinEngine,
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    done: list[JoinMetrics],
) -> Iterator[pa.RecordBatch]:
    """The joined batches; the run's metrics go to ``done`` when a row entered it. Before
    each output batch the driver's inbox gets a snapshot of them (at most every
    :data:`~enrich.spark.metrics.inbox.EVERY` seconds, and before the first): Spark may
    stop reading there (``show``, ``limit``), and then never reads the task's update."""
    reports = run_of(plan.accumulator)
    joined = joined_batches(engine, batches, plan.on, plan.chunk_rows, plan.struct_type)
    try:
        for rows, arrow in joined:
            out = plan.output(rows, arrow, schema)
            if out is not None:
                if reports is not None:  # reported before Spark gets it
                    snapshot(reports, plan.name, engine.statistics())
                yield out
    finally:
        joined.close()
        if engine.statistics().rows_in:  # not for a partition of empty batches
            done.append(plan.report(engine, reports))


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
    engine = plan.engine(_key_columns(first_input))

    def chunks() -> Iterator[tuple[tuple[int, bool], Any]]:
        for arrays in _prepend(first_input, inputs):
            columns = _key_columns(arrays)
            length = len(columns[0])
            if not length:  # an empty batch still needs its (empty) answer, in its place
                yield (0, True), engine.chunk_keys(columns)
            for start in range(0, length, size):
                part = [column.slice(start, size) for column in columns]
                yield (len(part[0]), start + size >= length), engine.chunk_keys(part)

    dimension = plan.struct_type
    run = engine.run(chunks())
    pieces: list[pa.Array] = []
    try:
        for joined in run:
            length, last = joined.tag
            arrow = joined.arrow(dimension).per_input_row(length)
            pieces.append(_structs(plan, struct_type, arrow.structs, arrow.errors))
            if last:
                yield pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
                pieces = []
    finally:
        run.close()
        plan.report(engine)


def _key_columns(arrays: pa.Array | tuple[pa.Array, ...]) -> list[pa.Array]:
    return list(arrays) if isinstance(arrays, tuple) else [arrays]


def _structs(
    plan: JoinPlan, struct_type: pa.DataType, structs: pa.StructArray, errors: pa.Array | None
) -> pa.StructArray:
    """One output struct per row: the dimension's fields (and the reason), NULL when
    nothing was found and there is no reason to report."""
    arrays = list(structs.flatten())
    mask = structs.is_null()
    if plan.with_error:
        if errors is None:
            errors = pa.nulls(len(structs), pa.string())
        else:
            mask = pc.and_(mask, errors.is_null())
        arrays.append(errors)
    return pa.StructArray.from_arrays(arrays, fields=list(struct_type), mask=mask)


def lookup_structs_for(plan: JoinPlan) -> Callable[[Iterator[Any]], Iterator[pa.Array]]:
    """``lookup_structs`` bound to ``plan`` (what Spark pickles for the SQL function)."""

    def structs(inputs: Iterator[Any]) -> Iterator[pa.Array]:
        return lookup_structs(plan, inputs)

    return structs
