"""The spark-submit jobs, run against the shared session, a real Redis and real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from jobs import _config, enrich_job, sql_job

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def config(tmp_path: Path, url: str, **sections: Any) -> _config.JobConfig:
    raw = {
        "sources": {
            "users": {
                "kind": "redis",
                "url": url,
                "key_template": "user:{}",
                "value": "json",
                "schema": "name string, tier string",
            }
        },
        **sections,
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(raw))
    return _config.load(path)


def orders(tmp_path: Path) -> Path:
    folder = tmp_path / "orders"
    folder.mkdir()
    rows = [{"order_id": i, "user_id": i % 4} for i in range(12)]
    (folder / "part-0.json").write_text("\n".join(json.dumps(r) for r in rows))
    return folder


def test_enrich_job_reads_joins_and_writes(
    spark: Any, tmp_path: Path, redis_server: Any, redis_client: redis.Redis
) -> None:
    for uid in (1, 2):
        redis_client.set(f"user:{uid}", json.dumps({"name": f"n{uid}", "tier": "t"}))
    out = tmp_path / "out"
    job = config(
        tmp_path,
        redis_server.url,
        input={
            "format": "json",
            "path": str(orders(tmp_path)),
            "schema": "order_id long, user_id long",
            "streaming": False,
        },
        joins=[
            {
                "source": "users",
                "on": "user_id",
                "how": "inner",
                "name": "job_users",
                "cache": {"max_rows": 100},
            }
        ],
        output={"format": "parquet", "path": str(out), "mode": "overwrite"},
    )
    enrich_job.run(spark, job)
    got = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
    assert got == sorted((i, i % 4, f"n{i % 4}", "t") for i in range(12) if i % 4 in (1, 2))


def test_enrich_job_streams_with_available_now(
    spark: Any, tmp_path: Path, redis_server: Any, redis_client: redis.Redis
) -> None:
    redis_client.set("user:3", json.dumps({"name": "three", "tier": "x"}))
    out = tmp_path / "stream-out"
    job = config(
        tmp_path,
        redis_server.url,
        input={
            "format": "json",
            "path": str(orders(tmp_path)),
            "streaming": True,
            "schema": "order_id long, user_id long",
        },
        joins=[{"source": "users", "on": "user_id", "on_error": "error_column"}],
        output={"format": "parquet", "path": str(out)},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger="availableNow",
    )
    query = enrich_job.run(spark, job)
    assert query is not None and query.exception() is None
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 12  # a left join keeps every row
    assert {r["name"] for r in rows if r["user_id"] == 3} == {"three"}


def test_sql_job_registers_lookups_and_runs_the_file(
    spark: Any, tmp_path: Path, redis_server: Any, redis_client: redis.Redis
) -> None:
    redis_client.set("user:1", json.dumps({"name": "one", "tier": "gold"}))
    out = tmp_path / "sql-out"
    job = config(
        tmp_path,
        redis_server.url,
        input={
            "format": "json",
            "path": str(orders(tmp_path)),
            "schema": "order_id long, user_id long",
            "streaming": False,
        },
        lookups={"job_dim_user": {"source": "users", "on_error": "null"}},
        output={"format": "parquet", "path": str(out), "mode": "overwrite"},
    )
    sql = """
        -- inner join through the SQL function
        SELECT o.order_id, o.u.name AS name
        FROM (SELECT *, job_dim_user(user_id) AS u FROM input) o
        WHERE o.u IS NOT NULL;
    """
    sql_job.run(spark, job, sql)
    got = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
    assert got == [(i, "one") for i in range(12) if i % 4 == 1]


def test_a_function_step_runs_in_order_with_the_joins(
    spark: Any, tmp_path: Path, redis_server: Any, redis_client: redis.Redis
) -> None:
    redis_client.set("user:1", json.dumps({"name": "one", "tier": "t"}))
    out = tmp_path / "mapped"
    job = config(
        tmp_path,
        redis_server.url,
        input={
            "format": "json",
            "path": str(orders(tmp_path)),
            "schema": "order_id long, user_id long",
            "streaming": False,
        },
        joins=[
            {"source": "users", "on": "user_id", "how": "inner", "name": "job_map_users"},
            {
                "function": "tests.jobs.functions:Scaled",
                "args": {"factor": 10, "column": "order_id"},
                "returns": "twice bigint",
                "name": "job_map_scaled",
            },
        ],
        output={"format": "parquet", "path": str(out), "mode": "overwrite"},
    )
    enrich_job.run(spark, job)
    got = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
    assert got == [(i, 1, "one", "t", i * 10) for i in range(12) if i % 4 == 1]
