"""Every dimension type through a real Redis: JSON values, hashes (nested fields as JSON
text) and string values; a bad value fails its key only."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
import redis

from enrich import DecodeError
from tests.connectors.redis.conftest import MakeLookup
from tests.support.redis_server import ContainerRedis, RedisServer

Server = RedisServer | ContainerRedis
UTC = timezone.utc
SCHEMA = (
    "name string, price decimal(10,2), seen timestamp, born date, tags array<string>, "
    "address struct<city: string, zip: int>, attrs map<string,string>, "
    "big decimal(20,2), avatar binary"
)
EXPECTED = (
    "Ada",
    Decimal("19.99"),
    datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
    date(1990, 12, 10),
    ["a", "b"],
    {"city": "Oslo", "zip": 150},
    {"team": "x"},
    Decimal("123456789012345678.91"),
    b"hi",
)


@pytest.mark.asyncio
async def test_json_values_of_every_type(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    # the raw text: big has 20 digits, more than a double holds
    redis_client.set(
        "t:1",
        '{"name": "Ada", "price": 19.99, "seen": "2024-05-01T14:30:00+02:00", '
        '"born": "1990-12-10", "tags": ["a", "b"], "address": {"city": "Oslo", "zip": 150}, '
        '"attrs": {"team": "x"}, "big": 123456789012345678.91, "avatar": "aGk="}',
    )
    redis_client.set("t:2", json.dumps({"name": "Bob", "seen": 1714566600000, "born": 7648}))
    redis_client.set("t:3", json.dumps({"name": "Eve", "address": {"zip": "north"}}))
    source = make_lookup(redis_server.url, key_template="t:{}", value="json", schema=SCHEMA)

    result = await source.lookup_many([1, 2, 3, 4])

    assert result[1] == EXPECTED
    assert result[2] == ("Bob", None, EXPECTED[2], EXPECTED[3], None, None, None, None, None)
    error = result[3]
    assert isinstance(error, DecodeError)
    assert error.field == "address.zip"
    assert "redis key b't:3': field 'address.zip': cannot read 'north' as int" in str(error)
    assert result[4] is None


@pytest.mark.asyncio
async def test_hash_fields_of_every_type(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.hset(
        "h:1",
        mapping={
            "name": "Ada",
            "price": "19.99",
            "seen": "1714566600",
            "born": "1990-12-10",
            "tags": '["a","b"]',
            "address": '{"city": "Oslo", "zip": 150}',
            "attrs": '{"team": "x"}',
            "big": "123456789012345678.91",
            "avatar": b"hi",  # a hash holds bytes as they are
        },
    )
    redis_client.hset("h:2", mapping={"name": "Bob", "tags": "[not json"})
    source = make_lookup(redis_server.url, key_template="h:{}", value="hash", schema=SCHEMA)

    result = await source.lookup_many([1, 2])

    assert result[1] == EXPECTED
    error = result[2]
    assert isinstance(error, DecodeError)
    assert error.field == "tags"
    assert "cannot read b'[not json' as array<string>" in str(error)


@pytest.mark.asyncio
async def test_string_values_of_a_nested_type(
    redis_server: Server, redis_client: redis.Redis, make_lookup: MakeLookup
) -> None:
    redis_client.set("s:1", '[{"sku": "a", "at": "2024-05-01T12:30:00Z"}]')
    source = make_lookup(
        redis_server.url,
        key_template="s:{}",
        value="string",
        schema="items array<struct<sku: string, at: timestamp>>",
    )

    result = await source.lookup_many([1])

    assert result[1] == ([{"sku": "a", "at": EXPECTED[2]}],)
