"""Lookups against a real standalone Redis: formats, misses, 1:N, keys, batching, errors."""

from __future__ import annotations

import json

import pytest
import redis

from enrich import DecodeError, LookupFailed, LookupSource
from tests.connectors.redis.conftest import MakeLookup
from tests.support.redis_server import ContainerRedis, RedisServer

Server = RedisServer | ContainerRedis


def _mget_calls(client: redis.Redis, command: str = "mget") -> int:
    stats = client.info("commandstats")
    entry = stats.get(f"cmdstat_{command}")
    return 0 if entry is None else int(entry["calls"])


@pytest.mark.asyncio
async def test_json_hits_and_misses(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.set("user:1", json.dumps({"name": "Ada", "tier": "gold", "credit": 12.5}))
    redis_client.set("user:2", json.dumps({"name": "Bob", "extra": "ignored"}))
    redis_client.set("user:3", "null")
    source = make_lookup(
        redis_server.url,
        key_template="user:{}",
        value="json",
        schema="name string, tier string, credit double",
    )

    result = await source.lookup_many([1, "2", 3, 4])

    assert isinstance(source, LookupSource)
    assert result[1] == ("Ada", "gold", 12.5)
    assert result["2"] == ("Bob", None, None)
    assert result[3] is None  # a stored JSON null is a miss
    assert result.get(4) is None
    assert _mget_calls(redis_client) == 1


@pytest.mark.asyncio
async def test_json_array_gives_several_rows(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.set("orders:7", json.dumps([{"sku": "a", "qty": 1}, {"sku": "b", "qty": 3}]))
    redis_client.set("orders:8", "[]")
    source = make_lookup(
        redis_server.url, key_template="orders:{}", value="json", schema="sku string, qty int"
    )

    result = await source.lookup_many([7, 8])

    assert result[7] == [("a", 1), ("b", 3)]
    assert result[8] == []


@pytest.mark.asyncio
async def test_string_value_is_the_single_field(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.set("score:a", "41")
    redis_client.set("score:b", "not a number")
    source = make_lookup(redis_server.url, key_template="score:{}", value="string", schema="s int")

    result = await source.lookup_many(["a", "b", "c"])

    assert result["a"] == (41,)
    assert isinstance(result["b"], DecodeError)
    assert result["b"].field == "s"
    assert result["b"].value == b"not a number"
    assert result.get("c") is None


@pytest.mark.asyncio
async def test_hash_with_hgetall(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.hset("h:1", mapping={"name": "Ada", "age": "36", "vip": "true", "x": "y"})
    source = make_lookup(
        redis_server.url,
        key_template="h:{}",
        value="hash",
        schema="name string, age int, vip boolean, missing string",
    )

    result = await source.lookup_many([1, 2])

    assert result[1] == ("Ada", 36, True, None)
    assert result.get(2) is None
    assert _mget_calls(redis_client, "hgetall") == 2
    assert _mget_calls(redis_client, "hmget") == 0


@pytest.mark.asyncio
async def test_hash_with_fields_uses_hmget_and_renames(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.hset("h:1", mapping={"n": "Ada", "a": "36", "big": "x" * 1000})
    source = make_lookup(
        redis_server.url,
        key_template="h:{}",
        value="hash",
        schema="name string, age int",
        fields={"name": "n", "age": "a"},
    )

    result = await source.lookup_many([1, 2])

    assert result[1] == ("Ada", 36)
    assert result.get(2) is None  # HMGET of a missing key: all fields nil
    assert _mget_calls(redis_client, "hmget") == 2
    assert _mget_calls(redis_client, "hgetall") == 0


@pytest.mark.asyncio
async def test_composite_keys(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.set("order:eu:7", json.dumps({"total": 9.5}))
    source = make_lookup(
        redis_server.url, key_template="order:{}:{}", value="json", schema="total double"
    )

    result = await source.lookup_many([("eu", 7), ("us", 7), ("eu",), "eu"])

    assert result[("eu", 7)] == (9.5,)
    assert result.get(("us", 7)) is None
    for bad in [("eu",), "eu"]:
        error = result[bad]
        assert isinstance(error, LookupFailed)
        assert (error.kind, error.retryable, error.key) == ("key", False, bad)
        assert "order:{}:{}" in str(error)


@pytest.mark.asyncio
async def test_binary_keys_and_values_are_kept_as_bytes(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    blob = bytes(range(256))
    redis_client.set(b"bin:\x00\xff\xfe", blob)
    redis_client.hset(b"hb:\x80", mapping={b"payload": blob, b"label": "é".encode()})
    strings = make_lookup(
        redis_server.url, key_template="bin:{}", value="string", schema="payload binary"
    )
    hashes = make_lookup(
        redis_server.url, key_template="hb:{}", value="hash", schema="payload binary, label string"
    )

    assert await strings.lookup_many([b"\x00\xff\xfe"]) == {b"\x00\xff\xfe": (blob,)}
    assert await hashes.lookup_many([b"\x80"]) == {b"\x80": (blob, "é")}


@pytest.mark.asyncio
async def test_mget_is_chunked_by_max_batch(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.mset({f"k:{i}": json.dumps({"i": i}) for i in range(1000)})
    source = make_lookup(
        redis_server.url, key_template="k:{}", value="json", schema="i int", max_batch=100
    )

    result = await source.lookup_many(list(range(1000)))

    assert result == {i: (i,) for i in range(1000)}
    assert _mget_calls(redis_client) == 10


@pytest.mark.asyncio
async def test_invalid_json_and_wrong_types_fail_only_their_key(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.set("u:good", json.dumps({"name": "Ada", "age": 36}))
    redis_client.set("u:broken", b"{not json")
    redis_client.set("u:typed", json.dumps({"name": "Bob", "age": "old"}))
    redis_client.set("u:scalar", "42")
    redis_client.set("u:badrow", json.dumps([{"name": "C", "age": 1}, 5]))
    source = make_lookup(
        redis_server.url, key_template="u:{}", value="json", schema="name string, age int"
    )

    result = await source.lookup_many(["good", "broken", "typed", "scalar", "badrow"])

    assert result["good"] == ("Ada", 36)
    broken = result["broken"]
    assert isinstance(broken, DecodeError)
    assert broken.value == b"{not json"
    assert "u:broken" in str(broken) and "not valid JSON" in str(broken)
    typed = result["typed"]
    assert isinstance(typed, DecodeError)
    assert (typed.field, typed.value) == ("age", "old")
    assert "'age'" in str(typed) and "'old'" in str(typed)
    assert isinstance(result["scalar"], DecodeError)
    assert isinstance(result["badrow"], DecodeError)


@pytest.mark.asyncio
async def test_wrongtype_fails_only_that_hash_key(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.hset("h:1", mapping={"name": "Ada"})
    redis_client.set("h:2", "a string, not a hash")
    redis_client.hset("h:3", mapping={"name": "Cy"})
    source = make_lookup(redis_server.url, key_template="h:{}", value="hash", schema="name string")

    result = await source.lookup_many([1, 2, 3])

    assert result[1] == ("Ada",)
    assert result[3] == ("Cy",)
    error = result[2]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable, error.key) == ("wrongtype", False, 2)
    assert f"{redis_server.host}:{redis_server.port}" in str(error)


@pytest.mark.asyncio
async def test_hash_lookups_beyond_max_batch_are_complete(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    for i in range(250):
        redis_client.hset(f"h:{i}", mapping={"i": str(i)})
    source = make_lookup(
        redis_server.url, key_template="h:{}", value="hash", schema="i int", max_batch=100
    )

    result = await source.lookup_many(list(range(260)))

    assert {k: v for k, v in result.items() if v is not None} == {i: (i,) for i in range(250)}
    assert _mget_calls(redis_client, "hgetall") == 260


@pytest.mark.asyncio
async def test_empty_call_opens_nothing(make_lookup: MakeLookup) -> None:
    # Port 1 is never a Redis: a call with no keys must not try to connect.
    source = make_lookup("redis://127.0.0.1:1/0", key_template="k:{}", value="json", schema="a int")

    assert await source.lookup_many([]) == {}
