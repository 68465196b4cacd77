"""The executor side of ``async_map`` (enrich/spark/async_maps/map_batches.py) and of the
SQL function (structs.py), driven without Spark: Arrow batches in, batches with the
function's fields out, on the process's runtime loop as in a Spark Python worker."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from itertools import count
from typing import Any

import pyarrow as pa

from enrich.engine.runtime import YOUNG_THRESHOLD, get_loop
from enrich.maps.map_settings import MapSettings
from enrich.spark.async_maps import map_batches as module
from enrich.spark.async_maps.map_batches import MapPlan, map_batches
from enrich.spark.async_maps.structs import map_structs

RETURNS = "twice bigint"
_keys = count()


def plan(fn: Any, **settings: Any) -> MapPlan:
    key = f"test-map-{next(_keys)}"
    return MapPlan(
        name=key,
        key=key,
        fn=fn,
        columns=("twice",),
        settings=MapSettings(returns=RETURNS, **settings),
    )


def batch(start: int, rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": list(range(start, start + rows))})


def test_unordered_keeps_its_capacity_full_across_input_batches() -> None:
    """A slow row of the first input batch holds only itself: the rows of the next input
    batch are called, and their output batches handed out, while it waits."""
    rows = module.OUTPUT_ROWS  # a full output batch of the second input batch's rows
    slow = asyncio.Event()  # of the runtime loop, where the calls run
    released = threading.Event()
    second_batch_read = threading.Event()

    async def fn(row: dict[str, Any]) -> dict[str, Any]:
        if row["id"] == 0:
            await slow.wait()
        return {"twice": 2 * row["id"]}

    def release() -> None:
        released.set()
        get_loop().call_soon_threadsafe(slow.set)

    def inputs() -> Iterator[pa.RecordBatch]:
        yield batch(0, rows)
        second_batch_read.set()
        yield batch(rows, 2 * rows)

    out = map_batches(plan(fn, mode="unordered", capacity=100), inputs())
    seen: list[int] = []
    try:
        while not released.is_set():
            got = next(out)  # blocks for good if the slow row held its batch's end
            seen += got.column("id").to_pylist()
            if any(i >= rows for i in got.column("id").to_pylist()):
                release()  # rows of the second batch came out: let the slow one answer
        rest = list(out)
    finally:
        release()
    assert second_batch_read.is_set()
    assert 0 not in seen  # the slow row was still out when the second batch's rows left
    ids = seen + [i for b in rest for i in b.column("id").to_pylist()]
    assert sorted(ids) == list(range(3 * rows))
    twice = [t for b in rest for t in b.column("twice").to_pylist()]
    assert all(t % 2 == 0 for t in twice)


def test_the_youngest_generation_collects_less_often_while_a_partition_runs() -> None:
    thresholds: list[tuple[int, int, int]] = []

    async def fn(row: dict[str, Any]) -> dict[str, Any]:
        thresholds.append(gc.get_threshold())
        return {"twice": 2 * row["id"]}

    before = gc.get_threshold()
    out = map_batches(plan(fn), iter([batch(0, 3)]))
    first = next(out)
    assert gc.get_threshold()[0] >= YOUNG_THRESHOLD  # while Spark holds the partition
    assert first.column("twice").to_pylist() == [0, 2, 4]
    assert list(out) == []
    assert thresholds and all(t[0] >= YOUNG_THRESHOLD for t in thresholds)
    assert gc.get_threshold() == before


def test_the_sql_functions_batches_collect_less_often_too() -> None:
    thresholds: list[tuple[int, int, int]] = []

    async def fn(row: dict[str, Any]) -> dict[str, Any]:
        thresholds.append(gc.get_threshold())
        return {"twice": 2 * row["id"]}

    before = gc.get_threshold()
    ids = pa.StructArray.from_arrays([pa.array([1, 2])], names=["id"])
    (struct,) = list(map_structs(plan(fn), None, iter([ids])))
    assert struct.field("twice").to_pylist() == [2, 4]
    assert thresholds and all(t[0] >= YOUNG_THRESHOLD for t in thresholds)
    assert gc.get_threshold() == before
