"""Pickling, per-process pool sharing, pool limits, event loops, and aclose()."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import pytest
import redis

from connectors.redis import RedisLookup
from tests.support.redis_server import ContainerRedis, RedisServer

Server = RedisServer | ContainerRedis


def _lookup_connections(client: redis.Redis) -> int:
    """Server connections whose last command was a lookup (not this test's own client)."""
    return sum(1 for entry in client.client_list() if entry["cmd"] in ("mget", "hgetall"))


def _source(url: str, **settings: Any) -> RedisLookup:
    return RedisLookup(url, key_template="k:{}", value="json", schema="a int", **settings)


def test_pickle_round_trip_carries_no_live_state(redis_server: Server) -> None:
    source = _source(redis_server.url, max_batch=7, pool_size=3, timeout=30.0)
    before = pickle.dumps(source)

    async def use() -> None:
        await source.lookup_many([1])
        try:
            assert pickle.dumps(source) == before  # the open client is not in the object
        finally:
            await source.aclose()

    asyncio.run(use())
    copy = pickle.loads(before)
    assert copy == source
    assert repr(copy) == repr(source)


@pytest.mark.asyncio
async def test_unpickled_copies_share_one_pool(
    redis_server: Server, redis_client: redis.Redis
) -> None:
    redis_client.set("k:1", json.dumps({"a": 1}))
    original = _source(redis_server.url)
    first, second = pickle.loads(pickle.dumps(original)), pickle.loads(pickle.dumps(original))
    try:
        assert await first.lookup_many([1]) == {1: (1,)}
        assert await second.lookup_many([1]) == {1: (1,)}
        assert _lookup_connections(redis_client) == 1
    finally:
        await first.aclose()
        await second.aclose()  # the shared pool is gone already: a no-op
    assert _lookup_connections(redis_client) == 0


@pytest.mark.asyncio
async def test_different_settings_get_different_pools(
    redis_server: Server, redis_client: redis.Redis
) -> None:
    a, b = _source(redis_server.url), _source(redis_server.url, pool_size=3)
    try:
        await a.lookup_many([1])
        await b.lookup_many([1])
        assert _lookup_connections(redis_client) == 2
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.asyncio
async def test_concurrent_lookups_stay_within_pool_size(
    redis_server: Server, redis_client: redis.Redis
) -> None:
    redis_client.mset({f"k:{i}": json.dumps({"a": i}) for i in range(400)})
    source = _source(redis_server.url, pool_size=3, max_batch=10)
    try:
        results = await asyncio.gather(*(source.lookup_many(range(400)) for _ in range(10)))
        assert all(r == {i: (i,) for i in range(400)} for r in results)
        assert 1 <= _lookup_connections(redis_client) <= 3
    finally:
        await source.aclose()


@pytest.mark.asyncio
async def test_aclose_then_lookup_reopens(redis_server: Server, redis_client: redis.Redis) -> None:
    redis_client.set("k:1", json.dumps({"a": 1}))
    source = _source(redis_server.url)
    try:
        await source.lookup_many([1])
        await source.aclose()
        assert _lookup_connections(redis_client) == 0
        assert await source.lookup_many([1]) == {1: (1,)}
    finally:
        await source.aclose()


def test_each_event_loop_gets_its_own_client(redis_server: Server) -> None:
    client = redis_server.client()
    client.set("k:1", json.dumps({"a": 1}))
    source = _source(redis_server.url)
    loops = [asyncio.new_event_loop(), asyncio.new_event_loop()]
    try:
        for loop in loops:  # both loops alive at once, each using the source
            assert loop.run_until_complete(source.lookup_many([1])) == {1: (1,)}
        assert _lookup_connections(client) == 2
    finally:
        for loop in loops:
            loop.run_until_complete(source.aclose())
            loop.close()
        client.close()
