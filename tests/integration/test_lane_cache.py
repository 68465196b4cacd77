"""The columnar lane with a cache against a real redis-server: the same rows as the
per-row join, cold and warm, in one store both read and fill, counted at the server."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
import redis

from enrich import JoinMetrics, LookupCache, lookup_chunks
from enrich.engine.runtime import get_loop
from enrich.lookup.cache.lookup_cache import cache_scope
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.lookup.outcome import ColumnarJoined, JoinedChunk
from tests.integration.conftest import MakeRedis, command_calls, server_stat
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)

SCHEMA = "name string, age int"
STRUCT = pa.struct([("name", pa.string()), ("age", pa.int32())])
KEYS = [1, 2, 3, 4, 5, 9, None, 1, 3, 9]


@pytest.fixture
def users(redis_client: redis.Redis) -> redis.Redis:
    """1, 2: rows; 3: 1:N; 4: JSON null (a miss); 5: not JSON (a decode error); 9: absent."""
    redis_client.set("user:1", json.dumps({"name": "Ada", "age": 36}))
    redis_client.set("user:2", json.dumps({"name": "Bob", "age": "41"}))
    redis_client.set("user:3", json.dumps([{"name": "Cy", "age": 1}, {"name": "Cy", "age": 2}]))
    redis_client.set("user:4", "null")
    redis_client.set("user:5", "{not json")
    return redis_client


def lane_rows(joined: ColumnarJoined | JoinedChunk) -> list[tuple[int, Any, Any]]:
    if isinstance(joined, JoinedChunk):
        errors = joined.errors or [None] * len(joined.indices)
        return list(zip(joined.indices, joined.rows, errors, strict=True))
    structs = joined.structs.to_pylist()
    return [(i, None if s is None else (s["name"], s["age"]), None) for i, s in enumerate(structs)]


def run_lane(source: Any, cache: LookupCache, keys: list[Any]) -> list[Any]:
    lane = ColumnarLane(
        source,
        STRUCT,
        JoinSettings(
            how="left",
            on_error="error_column",
            cache=cache,
            timeout=5.0,
            capacity=100,
            max_batch=100,
        ),
        metrics=JoinMetrics(),
    )
    return [lane_rows(j) for j in lane.run([(0, pa.array(keys, pa.int64()))])]


def run_per_row(source: Any, cache: LookupCache, keys: list[Any]) -> list[Any]:
    chunks = lookup_chunks([(0, keys)], source, on_error="error_column", cache=cache)
    return [lane_rows(c) for c in chunks]


def test_the_lane_with_a_cache_gives_the_per_row_joins_rows_cold_and_warm(
    users: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    settings = dict(key_template="user:{}", value="json", schema=SCHEMA)
    per_row = make_redis(redis_server.url, **settings)
    lane_source = make_redis(redis_server.url, **settings)
    reference = run_per_row(per_row, LookupCache(max_rows=100, ttl=60), KEYS)
    cache = LookupCache(max_rows=100, ttl=60)
    users.config_resetstat()
    assert run_lane(lane_source, cache, KEYS) == reference  # cold: asked at the server
    assert server_stat(users, "keyspace_hits") == 5  # 1, 2, 3, 4, 5 (no user:9)
    assert run_lane(lane_source, cache, KEYS) == reference  # warm: only 5 is asked again
    assert server_stat(users, "keyspace_hits") == 6
    assert run_per_row(lane_source, cache, KEYS) == reference  # the per-row join: the same
    assert server_stat(users, "keyspace_hits") == 7
    stats = cache.storage(cache_scope(lane_source)).statistics()
    # 6 distinct keys a run: all missed cold (5 loads: 5's decode error is not cached),
    # then 5 hits and 1 miss (5) in each of the two warm runs.
    assert (stats.hits, stats.misses, stats.loads, stats.load_failures) == (10, 8, 5, 3)


def test_the_lane_reads_the_stores_entries_and_asks_again_once_they_expire(
    users: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    source = make_redis(redis_server.url, key_template="user:{}", value="json", schema=SCHEMA)
    cache = LookupCache(max_rows=100, ttl=60, ttl_missing=30)
    store = cache.storage(cache_scope(source))
    now = get_loop().time()
    store.put(1, ("cached Ada", 1), now)  # live: read instead of the server's value
    store.put(2, ("old Bob", 2), now - 60)  # expired just now: asked again
    store.put(9, ("ghost", 9), now)  # live though the server has no user:9
    users.config_resetstat()
    [rows] = run_lane(source, cache, [1, 2, 9, 4])
    assert rows == [
        (0, ("cached Ada", 1), None),
        (1, ("Bob", 41), None),
        (2, ("ghost", 9), None),
        (3, None, None),  # 4 holds JSON null: a miss
    ]
    assert command_calls(users, "mget") == 1
    assert (server_stat(users, "keyspace_hits"), server_stat(users, "keyspace_misses")) == (2, 0)
    # 2 and the miss 4 were put back with their TTLs, at the time the answer came.
    entries = dict(store.entries())
    assert entries[2][0] >= now + 60
    assert store.get(2, now) == ("Bob", 41)  # the lane's row, read as the per-row join does
    assert entries[4][0] == pytest.approx(entries[2][0] - 30)
