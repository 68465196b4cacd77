"""One key rule against real stores: 1, 1.0 and True are never coalesced, cached or asked
for as one key; each row gets its own correct outcome, and nothing is silently wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from enrich import LookupCache, lookup_rows
from tests.integration.conftest import MakeHttp, MakeRedis, command_calls, server_stat
from tests.support.http_server import HttpTestServer
from tests.support.redis_server import RedisServer

RULE = "keys must be str, int or bytes"
MIXED = [1, 1.0, True, 1, "1", 2, False, 2.0, None]


def rows(keys: list[Any]) -> list[dict[str, Any]]:
    return [{"n": n, "uid": key} for n, key in enumerate(keys)]


def outcomes(out: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["n"], r["name"], (r["enrich_error"] or "").partition(";")[0]) for r in out]


EXPECTED = [
    (0, "Ada", ""),
    (1, None, "decode: row 1: key field 'uid' is a float (1.0)"),
    (2, None, "decode: row 2: key field 'uid' is a bool (True)"),
    (3, "Ada", ""),
    (4, "Ada", ""),  # the text "1" is the store's key user:1 too
    (5, "Bob", ""),
    (6, None, "decode: row 6: key field 'uid' is a bool (False)"),
    (7, None, "decode: row 7: key field 'uid' is a float (2.0)"),
    (8, None, ""),  # a null key joins nothing
]


@pytest.fixture
def users(redis_client: redis.Redis) -> redis.Redis:
    redis_client.set("user:1", json.dumps({"name": "Ada"}))
    redis_client.set("user:2", json.dumps({"name": "Bob"}))
    redis_client.set("user:True", json.dumps({"name": "WRONG: a bool's text"}))
    redis_client.set("user:1.0", json.dumps({"name": "WRONG: a float's text"}))
    return redis_client


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "cache"])
def test_mixed_key_types_against_redis(
    users: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis, cached: bool
) -> None:
    source = make_redis(
        redis_server.url, key_template="user:{}", value="json", schema="name string"
    )
    cache = LookupCache(max_rows=100, ttl=60) if cached else None
    if cache is not None:  # 1 and 2 are cached before the mixed rows come
        warm = list(lookup_rows(rows([1, 2]), source, on="uid", cache=cache))
        assert [r["name"] for r in warm] == ["Ada", "Bob"]
    users.config_resetstat()
    out = list(lookup_rows(rows(MIXED), source, on="uid", on_error="error_column", cache=cache))
    assert outcomes(out) == EXPECTED
    assert all(RULE in r["enrich_error"] for r in out if r["enrich_error"])
    # Only str and int keys reach the server, in one MGET: 1, "1" and 2, or with the
    # cache only "1" (a str, another key to Python); never user:1.0 or user:True.
    assert command_calls(users, "mget") == 1
    assert server_stat(users, "keyspace_hits") == (1 if cached else 3)
    assert server_stat(users, "keyspace_misses") == 0
    dropped = list(lookup_rows(rows(MIXED), source, on="uid", on_error="drop", cache=cache))
    assert [r["n"] for r in dropped] == [0, 3, 4, 5, 8]


def test_http_never_asks_for_a_float_or_a_bool(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.data.update({"1": {"name": "Ada"}, "2": {"name": "Bob"}})
    http_server.data.update({"1.0": {"name": "WRONG"}, "True": {"name": "WRONG"}})
    source = make_http(schema="name string")
    out = list(lookup_rows(rows(MIXED), source, on="uid", on_error="error_column"))
    assert outcomes(out) == EXPECTED
    asked = sorted(r.key for r in http_server.requests if r.key is not None)
    assert asked == ["1", "1", "2"]  # 1 and "1": one request each, never /users/1.0
