"""Spark's Python workers forked from ``enrich.spark.session``'s daemon: the session helper
sets it on a local master, the workers it forks have this package imported before their
first batch, and what they compute is right (Arrow, asyncio, an ``async_map`` against a
real HTTP service)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from enrich.spark import async_map
from tests.spark.functions import Lookup
from tests.support.http_server import HttpTestServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def _marked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each row with what the worker knows: forked from our daemon (its module's marker,
    read without importing it: a worker of pyspark.daemon has not imported it), the
    modules the daemon imported, and Arrow and asyncio work done after the fork."""
    import asyncio

    import pyarrow.compute as pc

    daemon = sys.modules.get("enrich.spark.session")
    warm = bool(daemon is not None and daemon.WARM)
    preloaded = daemon is not None and "enrich.spark.join.join_batches" in daemon.LOADED

    async def doubled(values: list[int]) -> list[int]:
        async def one(v: int) -> int:
            await asyncio.sleep(0)
            return 2 * v

        return list(await asyncio.gather(*(one(v) for v in values)))

    for batch in batches:
        n = batch.num_rows
        ids = batch.column("n")
        yield pa.RecordBatch.from_arrays(
            [
                *batch.columns,
                pc.multiply(ids, 3),
                pa.array(asyncio.run(doubled(ids.to_pylist())), pa.int64()),
                pa.array([warm] * n),
                pa.array([preloaded] * n),
                pa.array([os.getpid()] * n, pa.int64()),
            ],
            names=[*batch.schema.names, "tripled", "doubled", "warm", "preloaded", "pid"],
        )


def test_workers_come_from_the_warm_daemon_and_compute_right(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    daemon = spark.sparkContext.getConf().get("spark.python.daemon.module")
    assert daemon == "enrich.spark.session"
    http_server.data.update({f"u{i}": {"name": f"user {i}", "age": i} for i in range(40)})
    df = spark.createDataFrame([(i, f"u{i}") for i in range(40)], "n long, key string")
    mapped = async_map(df.repartition(2), Lookup(f"http://127.0.0.1:{http_server.port}/users"),
                       "name string, age int", name="warm_daemon_map")  # fmt: skip
    schema = (
        "n long, key string, name string, age int, tripled long, doubled long, "
        "warm boolean, preloaded boolean, pid long"
    )
    rows = mapped.mapInArrow(_marked, schema).collect()
    assert sorted((r.n, r.key, r.name, r.age, r.tripled, r.doubled) for r in rows) == [
        (i, f"u{i}", f"user {i}", i, 3 * i, 2 * i) for i in range(40)
    ]
    assert all(r.warm and r.preloaded for r in rows), {(r.pid, r.warm) for r in rows}
    assert os.getpid() not in {r.pid for r in rows}


@pytest.mark.parametrize(
    ("master", "local"),
    [(None, True), ("local", True), ("local[2]", True), ("local[*]", True),
     ("local-cluster[2,1,1024]", False), ("yarn", False), ("spark://h:7077", False)],
)  # fmt: skip
def test_the_session_helper_warms_local_masters_only(master: Any, local: bool) -> None:
    # On a cluster the daemon needs the package installed on the executors, not only
    # shipped with --py-files (which reaches the workers, not the daemon): opt-in there.
    import enrich.spark

    # Through the package first: importing the submodule directly before enrich.spark's
    # lazy session() was looked up would bind the module over that name.
    assert callable(enrich.spark.session)
    assert sys.modules["enrich.spark.session"].is_local(master) is local
