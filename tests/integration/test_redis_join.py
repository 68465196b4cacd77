"""The lookup join against a real redis-server: join semantics, coalescing, batching and
the cache, counted where it matters (at the server, with INFO)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from enrich import LookupCache, lookup_rows
from tests.integration.conftest import MakeRedis, command_calls, server_stat
from tests.support.redis_server import RedisServer

USER_SCHEMA = "name string, age int"


@pytest.fixture
def users(redis_client: redis.Redis) -> redis.Redis:
    """user:1, user:2 (objects), user:3 (a 1:N array), user:4 (a stored JSON null)."""
    redis_client.set("user:1", json.dumps({"name": "Ada", "age": 36}))
    redis_client.set("user:2", json.dumps({"name": "Bob", "age": "41", "extra": True}))
    redis_client.set("user:3", json.dumps([{"name": "Cy", "age": 1}, {"name": "Cy", "age": 2}]))
    redis_client.set("user:4", "null")
    return redis_client


def orders(*user_ids: Any) -> list[dict[str, Any]]:
    return [{"order": n, "user_id": uid} for n, uid in enumerate(user_ids)]


def test_left_join_of_json_values(
    users: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    source = make_redis(redis_server.url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    out = list(lookup_rows(orders(1, 9, 3, 4, None, 2), source, on="user_id"))
    assert out == [
        {"order": 0, "user_id": 1, "name": "Ada", "age": 36},
        {"order": 1, "user_id": 9, "name": None, "age": None},
        {"order": 2, "user_id": 3, "name": "Cy", "age": 1},
        {"order": 2, "user_id": 3, "name": "Cy", "age": 2},
        {"order": 3, "user_id": 4, "name": None, "age": None},
        {"order": 4, "user_id": None, "name": None, "age": None},
        {"order": 5, "user_id": 2, "name": "Bob", "age": 41},
    ]
    # Keys 1, 9, 3, 4, 2 in one MGET (the null key asks nothing): 3 hits, 1 miss at the
    # server (user:4 exists, holding JSON null, which the join reads as a miss).
    assert command_calls(users, "mget") == 1
    assert (server_stat(users, "keyspace_hits"), server_stat(users, "keyspace_misses")) == (4, 1)


def test_inner_join_drops_misses_and_keeps_every_row_of_a_1_to_n_key(
    users: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    source = make_redis(redis_server.url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    out = list(
        lookup_rows(orders(9, 3, 4, None, 1), source, on="user_id", how="inner", prefix="u_")
    )
    assert out == [
        {"order": 1, "user_id": 3, "u_name": "Cy", "u_age": 1},
        {"order": 1, "user_id": 3, "u_name": "Cy", "u_age": 2},
        {"order": 4, "user_id": 1, "u_name": "Ada", "u_age": 36},
    ]


@pytest.mark.parametrize("fields", [None, ["status", "total"], {"status": "st", "total": "tt"}])
def test_hash_values_with_composite_keys(
    redis_client: redis.Redis,
    redis_server: RedisServer,
    make_redis: MakeRedis,
    fields: Any,
) -> None:
    names = fields if isinstance(fields, dict) else {"status": "status", "total": "total"}
    redis_client.hset("order:eu:7", mapping={names["status"]: "paid", names["total"]: "12.5"})
    redis_client.hset("order:us:7", mapping={names["status"]: "open", names["total"]: "3"})
    source = make_redis(
        redis_server.url,
        key_template="order:{}:{}",
        value="hash",
        fields=fields,
        schema="status string, total double",
    )
    data = [
        {"region": "eu", "id": 7},
        {"region": "us", "id": 7},
        {"region": "eu", "id": 9},  # no such hash
        {"region": None, "id": 7},  # a null key part: no lookup
        {"region": "eu", "id": 7},  # the same key again
    ]
    out = list(lookup_rows(data, source, on=["region", "id"]))
    assert out == [
        {"region": "eu", "id": 7, "status": "paid", "total": 12.5},
        {"region": "us", "id": 7, "status": "open", "total": 3.0},
        {"region": "eu", "id": 9, "status": None, "total": None},
        {"region": None, "id": 7, "status": None, "total": None},
        {"region": "eu", "id": 7, "status": "paid", "total": 12.5},
    ]
    # One round trip per distinct key at most: eu:7 was asked once (coalesced).
    command = "hgetall" if fields is None else "hmget"
    assert command_calls(redis_client, command) == 3


def test_a_thousand_rows_over_ten_keys_cost_one_mget_of_ten_keys(
    redis_client: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    for k in range(8):  # keys 8 and 9 are misses
        redis_client.set(f"user:{k}", json.dumps({"name": f"n{k}", "age": k}))
    source = make_redis(redis_server.url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    data = [{"i": i, "user_id": i % 10} for i in range(1000)]
    it = lookup_rows(data, source, on="user_id", capacity=1000)
    out = list(it)
    assert [r["i"] for r in out] == list(range(1000))
    assert all(r["name"] == (f"n{r['user_id']}" if r["user_id"] < 8 else None) for r in out)
    # Counted by the server: one MGET, and each of the ten keys read exactly once.
    assert command_calls(redis_client, "mget") == 1
    assert server_stat(redis_client, "keyspace_hits") == 8
    assert server_stat(redis_client, "keyspace_misses") == 2


def test_with_little_capacity_coalescing_still_bounds_the_mgets(
    redis_client: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    for k in range(10):
        redis_client.set(f"user:{k}", json.dumps({"name": f"n{k}", "age": k}))
    source = make_redis(redis_server.url, key_template="user:{}", value="json", schema=USER_SCHEMA)
    data = [{"i": i, "user_id": i % 10} for i in range(1000)]
    out = list(lookup_rows(data, source, on="user_id", capacity=100))
    assert [(r["i"], r["age"]) for r in out] == [(i, i % 10) for i in range(1000)]
    # At most one MGET per admitted chunk of records, each asking each key once: without
    # coalescing the server would read a key once per record (1,000 reads).
    assert command_calls(redis_client, "mget") <= 1000 // 10
    assert server_stat(redis_client, "keyspace_hits") <= 10 * command_calls(redis_client, "mget")


@pytest.fixture
def dense_keys(redis_client: redis.Redis) -> redis.Redis:
    """k:0 .. k:1999, each holding its own number."""
    with redis_client.pipeline(transaction=False) as pipe:
        for k in range(2000):
            pipe.set(f"k:{k}", json.dumps({"v": k}))
        pipe.execute()
    redis_client.config_resetstat()
    return redis_client


def mget_sizes(client: redis.Redis) -> list[int]:
    """The key count of every MGET in the slow log (which the caller set to log all)."""
    sizes = []
    for entry in client.slowlog_get(10_000):
        args = entry["command"].split()
        if args[0].upper() == b"MGET":
            # The slow log keeps 32 arguments; the last then reads "... (N more arguments)".
            if len(args) >= 4 and args[-4] == b"...":
                sizes.append(len(args) - 5 + int(args[-3].lstrip(b"(")))
            else:
                sizes.append(len(args) - 1)
    return sizes


@pytest.fixture
def slowlog_everything(redis_client: redis.Redis) -> Any:
    old = redis_client.config_get("slowlog-*")
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.config_set("slowlog-max-len", 10_000)
    redis_client.slowlog_reset()
    yield redis_client
    for name, value in old.items():
        redis_client.config_set(name, value)


def test_two_thousand_distinct_keys_go_in_mgets_of_at_most_max_batch(
    dense_keys: redis.Redis,
    slowlog_everything: redis.Redis,
    redis_server: RedisServer,
    make_redis: MakeRedis,
) -> None:
    source = make_redis(redis_server.url, key_template="k:{}", value="json", schema="v int")
    data = ({"id": k} for k in range(2000))
    out = list(lookup_rows(data, source, on="id", capacity=2000, max_batch=250))
    assert [r["v"] for r in out] == list(range(2000))
    sizes = mget_sizes(dense_keys)
    assert len(sizes) == command_calls(dense_keys, "mget")
    assert sum(sizes) == 2000  # every key asked once
    assert max(sizes) <= 250
    assert sizes == [250] * 8  # 2000 / 250: no partial batch
    assert command_calls(dense_keys, "mget") == 8


def test_a_second_run_is_answered_by_the_shared_cache(
    redis_client: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    for k in range(10):
        redis_client.set(f"user:{k}", json.dumps({"name": f"n{k}", "age": k}))
    cache = LookupCache(max_rows=100)
    settings: dict[str, Any] = {"key_template": "user:{}", "value": "json", "schema": USER_SCHEMA}
    data = [{"i": i, "user_id": i % 12} for i in range(120)]  # keys 10, 11: misses
    expected = [
        {"i": i, "user_id": i % 12, "name": f"n{i % 12}" if i % 12 < 10 else None,
         "age": i % 12 if i % 12 < 10 else None}
        for i in range(120)
    ]  # fmt: skip
    first = list(lookup_rows(data, make_redis(redis_server.url, **settings), on="user_id",
                             cache=cache, capacity=200))  # fmt: skip
    assert first == expected
    assert command_calls(redis_client, "mget") == 1
    # The store changes behind the cache's back: a cached answer is the proof of a hit.
    redis_client.set("user:0", json.dumps({"name": "changed", "age": 0}))
    # Another run, with an equal but distinct source object: the same process cache.
    it = lookup_rows(data, make_redis(redis_server.url, **settings), on="user_id", cache=cache,
                     capacity=200)  # fmt: skip
    assert list(it) == expected
    assert command_calls(redis_client, "mget") == 1  # no new MGET: misses were cached too
    # A different cache does not share those entries: it asks the server again.
    fresh = list(lookup_rows(data, make_redis(redis_server.url, **settings), on="user_id",
                             cache=LookupCache(max_rows=100), capacity=200))  # fmt: skip
    assert fresh[0]["name"] == "changed"
    assert command_calls(redis_client, "mget") == 2
