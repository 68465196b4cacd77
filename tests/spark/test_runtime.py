"""The per-process runtime after a failed task, metrics errors, and the Java check."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from connectors.redis import RedisLookup
from enrich import LookupCache
from enrich.spark import join_names, lookup_join, session, statistics
from enrich.testing import FakeSource

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]


def test_a_failed_task_leaves_a_working_runtime(
    spark: SparkSession, redis_server: Any, redis_client: redis.Redis
) -> None:
    redis_client.set("user:u1", json.dumps({"name": "Ada"}))
    df = spark.createDataFrame([("u1",), ("bad",)], "k string").coalesce(1)
    failing = FakeSource({"u1": ("x",), "bad": ValueError("this key is broken")})
    with pytest.raises(Exception, match="this key is broken"):
        lookup_join(df, failing, on="k").collect()  # Spark drops the worker after this
    users = RedisLookup(
        redis_server.url, key_template="user:{}", value="json", schema="name string"
    )
    out = lookup_join(df, users, on="k", cache=LookupCache(max_rows=10), name="after_failure")
    assert [(r.k, r.name) for r in out.collect()] == [("u1", "Ada"), ("bad", None)]
    assert "after_failure" in join_names()


def test_statistics_of_an_unknown_join(spark: SparkSession) -> None:
    with pytest.raises(LookupError, match="no lookup join named 'nope'"):
        statistics("nope")


def test_session_without_java_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="Spark needs a Java runtime"):
        session("no-java")
