"""Bounded answers: a Redis value over max_value_bytes fails its own key, not its batch."""

from __future__ import annotations

import json

import pytest
import redis

from enrich import LookupFailed
from tests.connectors.redis.conftest import MakeLookup
from tests.support.redis_server import ContainerRedis, RedisServer

LIMIT = 64 * 1024
BIG = 3 * 1024 * 1024


@pytest.mark.asyncio
@pytest.mark.parametrize("value", ["json", "string"])
async def test_an_oversized_string_fails_only_its_key(
    redis_server: RedisServer | ContainerRedis,
    redis_client: redis.Redis,
    make_lookup: MakeLookup,
    value: str,
) -> None:
    for i in range(5):
        redis_client.set(f"user:{i}", json.dumps({"name": f"n{i}"}))
    redis_client.set("user:big", json.dumps({"name": "x" * BIG}))
    source = make_lookup(
        redis_server.url,
        key_template="user:{}",
        value=value,
        schema="name string",
        max_value_bytes=LIMIT,
    )

    result = await source.lookup_many([0, 1, "big", 2, 3, 4, "absent"])

    error = result["big"]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable, error.key) == ("too_large", False, "big")
    assert f"max_value_bytes={LIMIT}" in str(error) and "b'user:big'" in str(error)
    assert result["absent"] is None
    for i in range(5):
        expected = f"n{i}" if value == "json" else json.dumps({"name": f"n{i}"})
        assert result[i] == (expected,)


@pytest.mark.asyncio
@pytest.mark.parametrize("fields", [None, ["name"]])
async def test_an_oversized_hash_fails_only_its_key(
    redis_server: RedisServer | ContainerRedis,
    redis_client: redis.Redis,
    make_lookup: MakeLookup,
    fields: list[str] | None,
) -> None:
    redis_client.hset("h:small", mapping={"name": "Ada"})
    redis_client.hset("h:big", mapping={"name": "x" * BIG})
    source = make_lookup(
        redis_server.url,
        key_template="h:{}",
        value="hash",
        fields=fields,
        schema="name string",
        max_value_bytes=LIMIT,
    )

    result = await source.lookup_many(["small", "big"])

    assert result["small"] == ("Ada",)
    assert isinstance(result["big"], LookupFailed) and result["big"].kind == "too_large"


def test_max_value_bytes_is_validated(redis_server: RedisServer | ContainerRedis) -> None:
    from connectors.redis import RedisLookup

    with pytest.raises(ValueError, match="max_value_bytes must be an int >= 1, got -1"):
        RedisLookup(
            redis_server.url, key_template="{}", value="json", schema="a int", max_value_bytes=-1
        )
