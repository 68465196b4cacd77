"""A relational source's defaults bound what a Spark join admits: on its defaults a join
queues a few statements per pool connection, never the 131072 rows a Redis join admits
(which, cut into statements of ``max_batch``, queued far more than the pool answers
within the timeout on a busy machine). Unit level: no server, no Spark session."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.http import HttpLookup
from connectors.mysql import MySqlLookup
from connectors.postgres import PostgresLookup
from connectors.redis import RedisLookup
from connectors.sql import SqlLookup
from connectors.sql.settings import STATEMENTS_PER_CONNECTION
from enrich.lookup.join_settings import DEFAULT_SPARK_CAPACITY, default_capacity
from enrich.spark.join.join_frame import join_settings
from enrich.spark.stages.operator_settings import LOOKUP_JOIN, SQL_LOOKUP, SQL_LOOKUP_JOIN
from enrich.testing import FakeSource

SCHEMA = "name string"
SOURCES: dict[str, Any] = {
    "postgres": lambda **kw: PostgresLookup("postgresql://u@h/db", table="t", schema=SCHEMA, **kw),
    "mysql": lambda **kw: MySqlLookup("mysql://u@h/db", table="t", schema=SCHEMA, **kw),
}


@pytest.fixture(params=sorted(SOURCES))
def make(request: pytest.FixtureRequest) -> Any:
    return SOURCES[request.param]


def _statements_per_connection(source: SqlLookup, capacity: int) -> float:
    settings = source._settings
    return capacity / (settings.pool_size * settings.max_batch)


@pytest.mark.parametrize("face", [LOOKUP_JOIN, SQL_LOOKUP, SQL_LOOKUP_JOIN], ids=lambda f: f.name)
def test_a_join_on_the_defaults_admits_what_the_pool_answers(make: Any, face: Any) -> None:
    source = make()
    settings = join_settings(face, source, None, {}, on="id")
    assert settings.capacity == source.preferred_capacity < DEFAULT_SPARK_CAPACITY
    assert _statements_per_connection(source, settings.capacity) <= STATEMENTS_PER_CONNECTION
    # A chunk (a quarter) still fills whole statements: its keys are not cut finer.
    assert settings.chunk_rows >= source._settings.max_batch


def test_the_bound_follows_the_pool_and_the_batch(make: Any) -> None:
    small = make(pool_size=2, max_batch=100)
    assert default_capacity(small) == STATEMENTS_PER_CONNECTION * 2 * 100
    settings = join_settings(LOOKUP_JOIN, small, None, {}, on="id")
    assert settings.capacity == 800 and settings.chunk_rows == 200


def test_a_capacity_the_user_sets_wins(make: Any) -> None:
    from enrich.spark import OperatorSettings

    source = make()
    assert join_settings(LOOKUP_JOIN, source, None, {"capacity": 300_000}).capacity == 300_000
    given = OperatorSettings(capacity=7)
    assert join_settings(LOOKUP_JOIN, source, given, {}).capacity == 7


def test_stores_without_a_preference_keep_the_spark_default() -> None:
    redis = RedisLookup("redis://localhost:6379", key_template="u:{}", value="json", schema=SCHEMA)
    http = HttpLookup("http://localhost:8080/users/{}", schema=SCHEMA)
    for source in (redis, http, FakeSource({}, schema=SCHEMA)):
        assert default_capacity(source) == DEFAULT_SPARK_CAPACITY
        assert join_settings(LOOKUP_JOIN, source, None, {}).capacity == DEFAULT_SPARK_CAPACITY


def test_a_full_cache_keeps_the_spark_default(make: Any) -> None:
    # A full cache asks the store nothing per row: the pool bounds nothing there.
    from enrich import FullCache, LookupCache

    source = make()
    full = join_settings(LOOKUP_JOIN, source, None, {}, cache=FullCache())
    assert full.capacity == DEFAULT_SPARK_CAPACITY
    partial = join_settings(LOOKUP_JOIN, source, None, {}, cache=LookupCache(max_rows=10))
    assert partial.capacity == source.preferred_capacity


def test_a_bad_preference_is_named() -> None:
    class Odd(FakeSource):
        preferred_capacity = 0

    with pytest.raises(ValueError, match=r"Odd.preferred_capacity must be an int >= 1, got 0"):
        default_capacity(Odd({}, schema=SCHEMA))
