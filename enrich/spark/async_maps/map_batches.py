"""The executor side of ``async_map``: Arrow batches in, batches with the function's
fields out.

Runs in Spark's Python workers and imports no pyspark (only pyarrow), so it is tested
like the engine. A partition is one operator run: each input batch's rows become dicts
(``RecordBatch.to_pylist``) and go to the operator as ``(position, row)`` records, at
most ``capacity`` in flight; what the calls return is read into ``returns`` and joined
to the input rows with Arrow ``take``. Output batches gather at least
:data:`OUTPUT_ROWS` rows (or whatever is left at the end), and an input batch is
released once every one of its rows came out.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from itertools import count
from typing import Any

import pyarrow as pa

from ...engine.caller.wait import WaitIterator
from ...engine.clock import LoopClock
from ...engine.records.arrow_types import arrow_schema
from ...engine.records.call_metrics import JoinMetrics, record_concurrency
from ...engine.runtime import fewer_collections, get_loop, run_sync
from ...maps.calls import call_for, user_retry
from ...maps.map_settings import MapSettings
from ...maps.results import Assembler
from ..metrics.metric_rows import observed_batches, progress, report, run_of

# Output rows gathered before a batch goes back to Spark: a batch per handful of rows
# would cost Spark more than the rows (each batch is a message to the JVM).
OUTPUT_ROWS = 4096


@dataclass(frozen=True)
class MapPlan:
    """Everything a worker needs to run one async map; picklable, built on the driver.

    Attributes:
        name: the map's name (its metrics are registered under it).
        key: the map's identity: its function is opened once per process under it.
        fn: the user's async function or :class:`~enrich.AsyncFunction`.
        columns: the names of the fields added (``returns``' names).
        settings: validated once on the driver, used as they are.
        accumulator: where a task adds its metrics, or None.
        observed: the output carries the metrics column and each task's metrics row.
    """

    name: str
    key: Hashable
    fn: Any
    columns: tuple[str, ...]
    settings: MapSettings
    accumulator: Any = None
    observed: bool = False

    def arrow_fields(self) -> list[pa.Field]:
        """The Arrow fields the map adds: ``returns``' fields, then the reason."""
        fields = list(arrow_schema(self.settings.returns, self.columns))
        if self.settings.with_error:
            fields.append(pa.field(self.settings.error_column, pa.string()))
        return fields


def map_batches(plan: MapPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The mapInArrow function: each input row with the fields its call returned.

    An empty partition yields nothing and calls nothing. Under ``plan.observed`` the
    batches have the metrics column (NULL), and the task's metrics row follows them.
    While it runs, the process's garbage collector collects its youngest generation
    less often (:func:`~enrich.engine.runtime.fewer_collections`).
    """
    first = next(batches, None)
    if first is None:
        return
    batches = _prepend(first, batches)
    schema = pa.schema([*first.schema, *plan.arrow_fields()])

    def work(inputs: Iterator[pa.RecordBatch], done: list[JoinMetrics]) -> Iterator[pa.RecordBatch]:
        return _map(plan, inputs, schema, done)

    with fewer_collections():  # see enrich.engine.runtime: a tenth of a call's CPU
        if not plan.observed:
            yield from work(batches, [])
            return
        yield from observed_batches(batches, work, schema, plan.arrow_fields())


def _map(
    plan: MapPlan,
    inputs: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    done: list[JoinMetrics],
) -> Iterator[pa.RecordBatch]:
    settings = plan.settings
    metrics = JoinMetrics()  # the task thread's counts; the calls count on the loop
    slices = Slices()

    def records() -> Iterator[tuple[int, dict[str, Any]]]:
        for batch in inputs:
            if batch.num_rows:
                start = slices.add(batch)
                metrics.rows_in += batch.num_rows
                yield from zip(count(start), batch.to_pylist())

    loop = get_loop()
    clock = LoopClock(loop)
    call = call_for(
        plan.fn,
        settings.batch_size is not None,
        key=plan.key,
        name=plan.name,
        policy=settings.on_error,
        metrics=JoinMetrics(),
        clock=clock,
    )
    protections = run_sync(lambda: gate(plan)) if settings.is_gated else None
    operator = dataclasses.replace(settings.operator(), retry=user_retry(settings.retry))
    run = WaitIterator(records(), call, settings=operator, clock=clock, gate=protections)
    assembler = Assembler(settings, metrics, plan.name)
    pending: list[tuple[int, Any]] = []
    reports = run_of(plan.accumulator)
    stopped = False
    try:
        for outputs in run.batches():
            pending += outputs
            if len(pending) >= OUTPUT_ROWS:
                out = list(_batches(plan, assembler, slices, pending, schema))
                # reported before Spark gets them: it may stop reading there
                progress(reports, plan.name, metrics, call.metrics)
                yield from out
                pending = []
        if pending:
            out = list(_batches(plan, assembler, slices, pending, schema))
            progress(reports, plan.name, metrics, call.metrics)
            yield from out
    except GeneratorExit:  # Spark stopped reading (show, limit): see metrics.inbox
        stopped = True
        raise
    finally:
        run.close()
        metrics.merge(call.metrics)
        statistics = run.statistics()
        metrics.retries += statistics.retries
        metrics.peak_in_flight = statistics.peak_in_flight
        record_concurrency(metrics, protections)  # concurrency="auto": its limit
        report(plan.accumulator, plan.name, metrics, reports, stopped)
        done.append(metrics)


async def gate(plan: MapPlan) -> Any:
    """This process's gate for ``plan``'s calls (run on the runtime loop)."""
    from enrich.protect.gate import gate_for

    settings = plan.settings
    return gate_for(
        plan.key,
        name=plan.name,
        concurrency=settings.concurrency,
        ceiling=settings.capacity,
        job_rate_limit=settings.job_rate_limit,
    )


def _batches(
    plan: MapPlan,
    assembler: Assembler,
    slices: Slices,
    outputs: list[tuple[int, Any]],
    schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """The output batches of ``outputs`` (one per input batch their rows came from);
    then the input batches whose rows are all out are released."""
    rows = assembler.rows(outputs)
    columns = assembler.columns(rows)
    if plan.settings.with_error:
        columns.append(pa.array(rows.errors, type=pa.string()))
    groups: dict[int, tuple[list[int], list[int]]] = {}
    locate = slices.locate
    for n, position in enumerate(rows.positions):
        start, index = locate(position)
        group = groups.get(start)
        if group is None:
            group = groups[start] = ([], [])
        group[0].append(index)
        group[1].append(n)
    whole = len(groups) == 1
    for start, (indices, numbers) in groups.items():
        batch = slices.batch(start)
        if indices != list(range(batch.num_rows)):
            batch = batch.take(pa.array(indices, type=pa.int64()))
        added = columns if whole else [c.take(pa.array(numbers, type=pa.int64())) for c in columns]
        yield pa.RecordBatch.from_arrays([*batch.columns, *added], schema=schema)
    slices.release(position for position, _ in outputs)


class Slices:
    """The input batches whose rows are in flight, by the position of their first row.

    Every record has one output (see :mod:`enrich.maps.calls`), so a batch is
    released once as many outputs as it has rows came back.
    """

    __slots__ = ("_batches", "_end", "_left", "_next", "_start", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._batches: dict[int, pa.RecordBatch] = {}
        self._left: dict[int, int] = {}
        self._next = 0
        self._start = self._end = -1  # the batch found last: most positions fall in it

    def add(self, batch: pa.RecordBatch) -> int:
        """Keep ``batch``; returns the position of its first row."""
        start = self._next
        self._next += batch.num_rows
        self._starts.append(start)
        self._batches[start] = batch
        self._left[start] = batch.num_rows
        return start

    def locate(self, position: int) -> tuple[int, int]:
        """The start of the batch holding ``position``, and the row's index in it."""
        if not self._start <= position < self._end:
            self._start = self._starts[bisect.bisect_right(self._starts, position) - 1]
            self._end = self._start + self._batches[self._start].num_rows
        return self._start, position - self._start

    def batch(self, start: int) -> pa.RecordBatch:
        return self._batches[start]

    def release(self, positions: Iterator[int]) -> None:
        """One output came back for each of ``positions``' records."""
        finished = []
        for position in positions:
            start, _ = self.locate(position)
            left = self._left[start] - 1
            self._left[start] = left
            if left == 0:
                finished.append(start)
        for start in finished:
            del self._batches[start], self._left[start]
            self._starts.remove(start)
            if start == self._start:
                self._start = self._end = -1

    def __len__(self) -> int:
        return len(self._batches)


def _prepend(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
