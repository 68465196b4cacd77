"""A streaming lookup join's metrics in each micro-batch's progress (DataFrame.observe),
the carrier Spark Connect has (on by default there; here, on classic Spark, asked for)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from enrich.spark import lookup_join, observed_statistics
from enrich.spark.metrics.observed import observed_values
from enrich.testing import FakeSource

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

# Per micro-batch: a hit, a miss, a null key and a failed lookup.
KEYS = ["u1", "nobody", None, "bad"]


def event_files(tmp_path: Path, batches: int) -> Path:
    folder = tmp_path / "events"
    folder.mkdir()
    for b in range(batches):
        rows = [{"event": b * 100 + i, "user_id": k} for i, k in enumerate(KEYS)]
        (folder / f"part-{b}.json").write_text("\n".join(json.dumps(r) for r in rows))
    return folder


def events(spark: Any, folder: Path) -> DataFrame:
    return (
        spark.readStream.schema("event bigint, user_id string")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
    )


def source() -> FakeSource:
    return FakeSource({"u1": ("Ada",), "bad": ValueError("broken")})


def run_to_memory(df: DataFrame, name: str, checkpoint: Path) -> Any:
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return query


def field(progress: Any, name: str) -> Any:
    """A progress's field: plain dicts from classic ``recentProgress``; from Connect a
    ``StreamingQueryProgress``, whose properties fill in what its JSON leaves out."""
    return progress[name] if type(progress) is dict else getattr(progress, name)


def check_progress(query: Any, name: str, batches: int) -> None:
    """Every micro-batch's progress holds that batch's numbers of join ``name``."""
    progress = [p for p in query.recentProgress if int(field(p, "numInputRows")) > 0]
    assert len(progress) == batches
    for p in progress:
        got = observed_statistics(p)[name]
        assert (got.rows_in, got.rows_out, got.misses, got.null_keys) == (4, 4, 1, 1)
        assert dict(got.errors) == {"ValueError": 1}, got.errors
        assert got.requests >= 1 and got.retries == 0 and got.timeouts == 0
        assert observed_values(p)[f"enrich.{name}"]["hits"] == 1  # the progress names them


def test_each_micro_batch_progress_carries_the_joins_metrics(
    spark: SparkSession, tmp_path: Path
) -> None:
    joined = lookup_join(
        events(spark, event_files(tmp_path, 2)),
        source(),
        on="user_id",
        on_error="null",
        name="observed_users",
        observe=True,  # the default under Spark Connect (test_connect.py)
    )
    assert joined.columns == ["event", "user_id", "value"]  # no metrics column shows
    query = run_to_memory(joined, "observed_users_out", tmp_path / "checkpoint")
    rows = spark.sql("SELECT event, value FROM observed_users_out").collect()
    assert sorted((r.event, r.value) for r in rows) == [  # no metrics row shows
        (0, "Ada"),
        (1, None),
        (2, None),
        (3, None),
        (100, "Ada"),
        (101, None),
        (102, None),
        (103, None),
    ]
    check_progress(query, "observed_users", 2)
