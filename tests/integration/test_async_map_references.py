"""The async_map benchmark compares like with like: its hand-written ``mapInPandas``, the
body of Spark's concurrent Arrow UDF, and ``async_map``'s worker side (per row and
batched) give the same rows for the same input, against the benchmark's own scoring
service (real aiohttp server processes). No JVM: each path's function runs on Arrow
batches (or pandas frames, or row by row) as Spark's workers would run it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from benchmarks.async_map_paths import (
    RETURNS,
    PostMany,
    PostRow,
    gather_per_batch,
    post_per_row,
)
from benchmarks.score_service import score_service
from enrich.demo.scoring import score
from enrich.maps.map_settings import MapSettings
from enrich.spark.async_maps.map_batches import MapPlan, map_batches

pytest.importorskip("pandas")
pytest.importorskip("requests")
pytestmark = pytest.mark.timeout(60)

COLUMNS = ("id", "user_id", "amount", "score", "label")


def batches() -> list[pa.RecordBatch]:
    """Three batches of the benchmark's rows (``user_id`` and ``amount`` functions of
    ``id``, amounts with and without a fraction)."""

    def one(ids: range) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict(
            {
                "id": pa.array(ids, pa.int64()),
                "user_id": pa.array([i * 7919 % 100_000 for i in ids], pa.int64()),
                "amount": pa.array([round(i % 1000 * 0.37, 2) for i in ids], pa.float64()),
            }
        )

    return [one(range(0, 70)), one(range(70, 75)), one(range(1000, 1130))]


def rows(tables: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    table = pa.Table.from_batches(tables).select(list(COLUMNS))
    return [tuple(row.values()) for row in table.to_pylist()]


def through_async_map(fn: Any, **settings: Any) -> list[tuple[Any, ...]]:
    plan = MapPlan(
        name=f"reference_{uuid.uuid4().hex[:6]}",
        key=uuid.uuid4().hex,
        fn=fn,
        columns=("score", "label"),
        settings=MapSettings(returns=RETURNS, **settings),
    )
    return rows(list(map_batches(plan, iter(batches()))))


def test_the_async_map_benchmark_paths_give_the_same_rows() -> None:
    expected = []
    for batch in batches():
        for row in batch.to_pylist():
            answer = score(row)
            expected.append((*row.values(), answer["score"], answer["label"]))
    assert len({label for *_, label in expected}) > 1  # the answers differ by row

    with score_service(latency=0.0, processes=1) as service:
        frames: Iterator[Any] = gather_per_batch(service.base)(b.to_pandas() for b in batches())
        schema = pa.schema(
            [*batches()[0].schema, pa.field("score", pa.float64()), pa.field("label", pa.string())]
        )
        # Spark converts the frames to the declared schema.
        by_hand = [
            pa.RecordBatch.from_pandas(f, schema=schema, preserve_index=False) for f in frames
        ]

        udf = post_per_row(service.base)
        arrow_udf = [
            (r["id"], r["user_id"], r["amount"], *udf(r["id"], r["user_id"], r["amount"]))
            for batch in batches()
            for r in batch.to_pylist()
        ]

        per_row = through_async_map(PostRow(service.base), capacity=100)
        unordered = through_async_map(PostRow(service.base), capacity=100, mode="unordered")
        batched = through_async_map(PostMany(service.base), batch_size=50, capacity=500)

    assert rows(by_hand) == expected
    assert arrow_udf == expected
    assert per_row == expected
    assert sorted(unordered) == expected
    assert batched == expected
