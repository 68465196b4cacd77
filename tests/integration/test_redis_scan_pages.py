"""A Redis full cache's pages against a real redis-server: the scan hands over Arrow
tables (its values decoded in bulk), and the snapshot built from them answers every key
exactly as the store's own lookup does (the mapping pages' answers), for JSON, hash and
string values: broken values, a hash with a field missing, 1:N arrays, a value over
``max_value_bytes`` and misses included."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
import redis

from enrich import FullCache, FullCacheSource
from enrich.engine.runtime import run_sync
from enrich.spi import arrow_schema
from enrich.testing import FakeClock
from tests.integration.conftest import MakeRedis
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


def pages(source: Any, page_rows: int) -> list[tuple[Any, int]]:
    async def read() -> list[tuple[Any, int]]:
        return [page async for page in source.scan_dimension(page_rows)]

    result: list[tuple[Any, int]] = run_sync(read, timeout=20)
    return result


def same(found: dict[Any, Any], expected: dict[Any, Any]) -> None:
    """Equal answers; exceptions equal by type and text."""
    assert found.keys() == expected.keys()
    for key, answer in expected.items():
        if isinstance(answer, BaseException):
            assert type(found[key]) is type(answer), key
            assert str(found[key]) == str(answer), key
        else:
            assert found[key] == answer, key


def check(make_redis: MakeRedis, url: str, keys: list[Any], **settings: Any) -> list[Any]:
    """The scan's pages; and the full cache's answers for ``keys`` (text: one Arrow
    array) are the store's, by ``lookup_many`` and by ``lookup_arrow``."""
    store = make_redis(url, key_template="k:{}", max_batch=7, max_value_bytes=200, **settings)
    scanned = pages(store, page_rows=10)
    expected = run_sync(lambda: store.lookup_many(keys), timeout=20)
    full = FullCacheSource(
        make_redis(url, key_template="k:{}", max_batch=7, max_value_bytes=200, **settings),
        FullCache(page_rows=10),
        clock=FakeClock(),
    )
    try:
        found = run_sync(lambda: full.lookup_many(keys), timeout=20)
        same(dict(found), dict(expected))
        arrow = run_sync(lambda: full.lookup_arrow(pa.array(keys), full_struct(full)), timeout=20)
        assert arrow.rows.to_pylist() == [
            None
            if type(expected[k]) is not tuple
            else dict(zip(names(full), expected[k], strict=True))
            for k in keys
        ]
        assert {keys[p] for p in arrow.errors} == {
            k for k in keys if isinstance(expected[k], BaseException)
        }
        assert {keys[p]: rows for p, rows in arrow.multi.items()} == {
            k: v for k, v in expected.items() if isinstance(v, list) and v
        }
    finally:
        run_sync(full.aclose, timeout=10)
    return scanned


def full_struct(full: FullCacheSource) -> pa.StructType:
    return pa.struct(list(arrow_schema(full.schema)))


def names(full: FullCacheSource) -> list[str]:
    return list(full.schema.names)


def arrow_rows(scanned: list[Any]) -> list[bytes]:
    return [key for page, _ in scanned if isinstance(page, pa.Table) for key in page[0].to_pylist()]


def test_json_pages_are_arrow_tables_answering_as_the_store(
    make_redis: MakeRedis, redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    for n in range(25):
        redis_client.set(f"k:{n}", json.dumps({"name": f"u{n}", "version": n}))
    redis_client.set("k:broken", "{not json")
    redis_client.set("k:wrong", json.dumps({"name": "w", "version": "seven"}))
    redis_client.set("k:nested", '{\n "name": "pretty", "version": 1}')
    redis_client.set("k:many", json.dumps([{"name": "a", "version": 1}, {"name": "b"}]))
    redis_client.set("k:null", "null")
    redis_client.set("k:huge", json.dumps({"name": "x" * 300, "version": 1}))
    keys: list[Any] = [*map(str, range(27)), "broken", "wrong", "nested", "many", "null", "huge"]
    scanned = check(
        make_redis, redis_server.url, keys, value="json", schema="name string, version int"
    )
    tables = [page for page, _ in scanned if isinstance(page, pa.Table)]
    assert len(tables) >= 3  # one per page of 10 keys
    assert tables[0].schema.names == ["redis_key", "name", "version"]
    assert sorted(arrow_rows(scanned)) == sorted(
        [f"k:{n}".encode() for n in range(25)] + [b"k:nested"]
    )
    others = {
        key: answer
        for page, _ in scanned
        if not isinstance(page, pa.Table)
        for key, answer in page.items()
    }
    assert set(others) == {b"k:broken", b"k:wrong", b"k:many", b"k:huge"}
    assert isinstance(others[b"k:many"], list)


def test_hash_and_string_pages_are_arrow_tables_answering_as_the_store(
    make_redis: MakeRedis, redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    for n in range(15):
        redis_client.hset(f"k:{n}", mapping={"name": f"u{n}", "version": str(n)})
    redis_client.hset("k:partial", mapping={"name": "no version"})  # a field missing
    redis_client.hset("k:wrong", mapping={"name": "w", "version": "seven"})
    redis_client.hset("k:huge", mapping={"name": "x" * 300, "version": "1"})
    keys: list[Any] = [*map(str, range(17)), "partial", "wrong", "huge"]
    for fields in (None, ["name", "version"]):
        scanned = check(
            make_redis,
            redis_server.url,
            keys,
            value="hash",
            schema="name string, version int",
            fields=fields,
        )
        assert all(isinstance(page, (pa.Table, dict)) for page, _ in scanned)
        assert sorted(arrow_rows(scanned)) == sorted(
            [f"k:{n}".encode() for n in range(15)] + [b"k:partial"]
        )
    redis_client.flushall()
    for n in range(12):
        redis_client.set(f"k:{n}", str(n * 10))
    redis_client.set("k:wrong", "ten")
    keys = [*map(str, range(14)), "wrong"]
    scanned = check(make_redis, redis_server.url, keys, value="string", schema="amount int")
    assert len(arrow_rows(scanned)) == 12
