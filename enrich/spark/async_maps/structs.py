"""The executor side of an async SQL function (``register_async_udf``): per batch of
arguments, one struct per row, in order.

Runs in Spark's Python workers and imports no pyspark. The function receives a dict per
row: a single struct argument gives its fields by name (``score(struct(*))`` passes the
row's columns, ``score(struct(a, b))`` the two), other arguments are named by the
function's ``arguments`` (Spark hands a Python function its arguments' values, not their
names). A row's struct is its call's result: a dict; the first dict of a list; NULL for
None, an empty list, or a failure under ``on_error="null"``; NULL fields and the reason
under ``"error_column"``. A NULL struct argument is not called: its result is NULL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ...engine.caller.wait import WaitIterator
from ...engine.clock import LoopClock
from ...engine.records.call_metrics import JoinMetrics
from ...engine.runtime import fewer_collections, get_loop, run_sync
from ...maps.calls import call_for, user_retry
from ...maps.results import Assembler
from ..metrics.metric_rows import report
from .map_batches import MapPlan, gate


def map_structs(
    plan: MapPlan, arguments: tuple[str, ...] | None, inputs: Iterator[Any]
) -> Iterator[pa.Array]:
    """The SQL function over ``inputs`` (per batch, an array or a tuple of arrays): per
    batch, a struct array of its rows' results, aligned with them."""
    settings = plan.settings
    metrics = JoinMetrics()
    # Per batch read and not yet answered: its rows, and how many of them were called.
    batches: list[tuple[int, int]] = []

    def records() -> Iterator[tuple[int, Any]]:
        base = 0
        for batch in inputs:
            arrays = batch if isinstance(batch, tuple) else (batch,)
            rows = _rows(arrays, arguments)
            called = [(p, row) for p, row in enumerate(rows, base) if row is not None]
            batches.append((len(rows), len(called)))
            metrics.rows_in += len(rows)
            base += len(rows)
            yield from called

    clock = LoopClock(get_loop())
    call = call_for(
        plan.fn,
        settings.batch_size is not None,
        key=plan.key,
        name=plan.name,
        policy=settings.on_error,
        metrics=JoinMetrics(),
        clock=clock,
    )
    operator = dataclasses.replace(settings.operator(), retry=user_retry(settings.retry))
    protections = run_sync(lambda: gate(plan)) if settings.is_gated else None
    run = WaitIterator(records(), call, settings=operator, clock=clock, gate=protections)
    assembler = Assembler(settings, metrics, plan.name)
    struct = pa.struct(plan.arrow_fields())
    pending: list[tuple[int, Any]] = []
    start = 0  # the position of the first row of the oldest batch not answered
    with fewer_collections():  # as async_map's partitions (enrich.engine.runtime)
        try:
            for outputs in run.batches():
                pending += outputs
                while batches and len(pending) >= batches[0][1]:
                    size, called = batches.pop(0)
                    yield _structs(assembler, struct, pending[:called], start, size)
                    del pending[:called]
                    start += size
            for size, _ in batches:  # batches none of whose rows was called
                yield _structs(assembler, struct, [], start, size)
                start += size
        finally:
            run.close()
            statistics = run.statistics()
            metrics.merge(call.metrics)
            metrics.retries += statistics.retries
            metrics.peak_in_flight = statistics.peak_in_flight
            report(plan.accumulator, plan.name, metrics)


def _rows(arrays: tuple[pa.Array, ...], arguments: tuple[str, ...] | None) -> list[Any]:
    """The dicts the function receives for one batch (None for a NULL struct)."""
    if len(arrays) == 1 and pa.types.is_struct(arrays[0].type) and arguments is None:
        return arrays[0].to_pylist()  # type: ignore[no-any-return]
    names = arguments or tuple(f"col{i}" for i in range(1, len(arrays) + 1))
    if len(names) != len(arrays):
        raise ValueError(
            f"the function was registered with arguments={names!r} ({len(names)}) but is "
            f"called with {len(arrays)} argument(s)"
        )
    columns = [array.to_pylist() for array in arrays]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _structs(
    assembler: Assembler, struct: pa.DataType, outputs: list[tuple[int, Any]], start: int, size: int
) -> pa.Array:
    """One batch's structs: its ``size`` rows' first output each (outputs in order)."""
    rows = assembler.rows(outputs)
    first = [-1] * size
    for n, position in enumerate(rows.positions):
        index = position - start
        if first[index] < 0:
            first[index] = n
    columns = assembler.columns(rows)
    errors = rows.errors
    if errors is not None:
        columns.append(pa.array(errors, type=pa.string()))
    if not size:
        return pa.array([], type=struct)
    if not rows.positions:  # no row of the batch was called, or none gave a row
        return pa.nulls(size, struct)
    picks = pa.array([max(n, 0) for n in first], type=pa.int64())
    taken = [column.take(picks) for column in columns]
    # NULL where the row gave nothing, or nothing but null fields and no reason.
    empty = [
        n < 0 or (rows.values[n] is None and (errors is None or errors[n] is None)) for n in first
    ]
    return pa.StructArray.from_arrays(taken, fields=list(struct), mask=pa.array(empty))
