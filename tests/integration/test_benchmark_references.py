"""The Spark benchmark compares like with like: its hand-written reference paths and
``lookup_join``'s worker side give the same rows for the same input, against a real
redis-server (hits, misses, a batch of misses only). No JVM: each path's function runs
on Arrow batches (or pandas frames) directly, as Spark's workers would run it."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from benchmarks.spark import SCHEMA, mget_arrow_per_batch, mget_per_batch
from connectors.redis import RedisLookup
from enrich.demo.dimension_service import user
from enrich.lookup.join_settings import JoinSettings
from enrich.spark.join.join_batches import JoinPlan, enrich_batches

pytest.importorskip("pandas")
pytestmark = pytest.mark.timeout(60)

MISSING = {3, 7, 8}


def batches() -> list[pa.RecordBatch]:
    def one(ids: list[int]) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict(
            {
                "order_id": pa.array(range(len(ids)), pa.int64()),
                "user_id": pa.array(ids, pa.int64()),
                "amount": pa.array([1.5] * len(ids), pa.float64()),
            }
        )

    return [one([0, 1, 2, 3, 1, 9]), one([7, 8]), one([4, 5, 6, 7])]


def rows(tables: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    table = pa.Table.from_batches(tables).select(
        ["order_id", "user_id", "amount", "name", "tier", "credit"]
    )
    return [tuple(row.values()) for row in table.to_pylist()]


def test_the_spark_benchmark_paths_give_the_same_rows(redis_client: Any, redis_server: Any) -> None:
    for uid in range(10):
        if uid not in MISSING:
            redis_client.set(f"user:{uid}", json.dumps(user(uid)))
    url = redis_server.url

    arrow_loop = list(mget_arrow_per_batch(url)(iter(batches())))
    frames = mget_per_batch(url)(batch.to_pandas() for batch in batches())
    schema = arrow_loop[0].schema  # Spark converts the frames to the declared schema
    pandas_loop = [
        pa.RecordBatch.from_pandas(f, schema=schema, preserve_index=False) for f in frames
    ]
    source = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
    plan = JoinPlan(
        name="bench_reference",
        source=source,
        on=(1,),
        columns=tuple(source.schema.names),
        settings=JoinSettings(timeout=None),
        accumulator=None,
    )
    joined = list(enrich_batches(plan, iter(batches())))

    expected = []
    for batch in batches():
        ids = batch["user_id"].to_pylist()
        for order, uid in zip(batch["order_id"].to_pylist(), ids, strict=True):
            document = None if uid in MISSING else user(uid)
            found = (None, None, None)
            if document is not None:
                found = (document["name"], document["tier"], float(document["credit"]))
            expected.append((order, uid, 1.5, *found))
    assert any(row[3] is None for row in expected) and any(row[3] for row in expected)
    assert rows(arrow_loop) == expected
    assert rows(pandas_loop) == expected
    assert rows(joined) == expected
