"""The full cache against a real redis-server: the whole dimension by SCAN, lookups
answered from memory (counted at the server), reloads on the fake clock, a reload
racing lookups, a store dying mid-reload, the memory bound."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import redis

from connectors.redis import RedisLookup
from enrich import (
    DimensionTooLarge,
    FullCache,
    FullCacheSource,
    JoinMetrics,
    lookup_chunks,
)
from enrich.engine.runtime import run_sync
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.lookup.outcome import ColumnarJoined
from enrich.testing import FakeClock
from tests.integration.conftest import MakeRedis, command_calls
from tests.support.full_cache_calls import lookup, stats, wait_load
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)

SCHEMA = "name string, version int"
STRUCT = pa.struct([("name", pa.string()), ("version", pa.int32())])


def put_users(client: redis.Redis, keys: range, version: int, template: str = "user:{}") -> None:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.set(template.format(key), json.dumps({"name": f"u{key}", "version": version}))
    pipe.execute()


@pytest.fixture
def full(make_redis: MakeRedis, redis_server: RedisServer) -> Iterator[Any]:
    """``full(cache, **redis_settings)``: a FullCacheSource on the test server, on a
    fake clock, closed afterwards."""
    made: list[FullCacheSource] = []

    def make(cache: FullCache, clock: FakeClock, **settings: Any) -> FullCacheSource:
        settings.setdefault("key_template", "user:{}")
        redis_source = make_redis(
            redis_server.url, value="json", schema=SCHEMA, max_batch=100, **settings
        )
        source = FullCacheSource(redis_source, cache, clock=clock)
        made.append(source)
        return source

    yield make
    for source in made:
        run_sync(source.aclose, timeout=10)


def test_the_whole_dimension_is_loaded_by_scan_and_lookups_ask_the_server_nothing(
    redis_client: redis.Redis, full: Any
) -> None:
    # The template's literal part has glob characters: they are escaped in the pattern,
    # so "u?[1]*:" keys are loaded and the decoy "uX[1]Y:" keys that an unescaped
    # pattern would match are not.
    put_users(redis_client, range(250), version=1, template="u?[1]*:{}")
    put_users(redis_client, range(5), version=9, template="uX1Y:{}")
    redis_client.set("u?[1]*:bad", "{not json")
    source = full(FullCache(page_rows=100), FakeClock(), key_template="u?[1]*:{}")
    answers = lookup(source, [0, 249, 300, "bad"])
    assert answers[0] == ("u0", 1) and answers[249] == ("u249", 1)
    assert answers[300] is None  # absent from the snapshot: a miss
    assert isinstance(answers["bad"], Exception)  # its stored decode error, as live
    loaded = stats(source)
    assert (loaded.loads, loaded.rows, loaded.version) == (1, 251, 1)
    assert loaded.bytes > 251 * len('{"name": "u0", "version": 1}')
    scans, mgets = command_calls(redis_client, "scan"), command_calls(redis_client, "mget")
    assert scans >= 3 and mgets >= 3  # pages of 100 keys, read in MGETs of 100
    for _ in range(3):
        assert lookup(source, list(range(1000)))[7] == ("u7", 1)
    # Lookups of 3,000 keys more, absent ones included: no command reached the server.
    assert command_calls(redis_client, "mget") == mgets
    assert command_calls(redis_client, "get") == 0
    assert command_calls(redis_client, "scan") == scans


def test_a_periodic_reload_swaps_in_the_new_dimension_on_the_clock(
    redis_client: redis.Redis, full: Any
) -> None:
    put_users(redis_client, range(10), version=1)
    clock = FakeClock()
    source = full(FullCache(reload_interval=60), clock)
    assert lookup(source, [3])[3] == ("u3", 1)
    put_users(redis_client, range(20), version=2)
    clock.advance(59)
    assert lookup(source, [3, 15]) == {3: ("u3", 1), 15: None}  # not due yet
    clock.advance(1)  # due: the reload starts on the loop
    wait_load(source)
    assert lookup(source, [3, 15]) == {3: ("u3", 2), 15: ("u15", 2)}
    after = stats(source)
    assert (after.loads, after.version, after.rows, after.failed_loads) == (2, 2, 20, 0)


def test_the_first_load_eager_or_lazy(redis_client: redis.Redis, full: Any) -> None:
    put_users(redis_client, range(10), version=1)
    lazy = full(FullCache(initial_load="lazy"), FakeClock())
    assert lookup(lazy, [1])[1] == ("u1", 1)  # asked at the server while loading
    eager = full(FullCache(), FakeClock())
    redis_client.config_resetstat()
    assert lookup(eager, [1])[1] == ("u1", 1)
    assert command_calls(redis_client, "scan") >= 1  # loaded before the answer
    assert stats(eager).loads == 1


def test_a_dimension_over_the_bound_fails_clearly(redis_client: redis.Redis, full: Any) -> None:
    put_users(redis_client, range(30), version=1)
    source = full(FullCache(max_rows=20, page_rows=10), FakeClock())
    with pytest.raises(DimensionTooLarge, match="more than max_rows=20 keys"):
        lookup(source, [1])
    by_bytes = full(FullCache(max_bytes=500), FakeClock())
    with pytest.raises(DimensionTooLarge, match="larger than max_bytes=500"):
        lookup(by_bytes, [1])
    assert stats(by_bytes).failed_loads == 1


class DyingRedis(RedisLookup):
    """A RedisLookup whose server is stopped after the first page of a reload."""

    server: RedisServer | None = None

    async def _pages(self, page_rows: int) -> Any:
        pages = 0
        async for page in super().scan_dimension(page_rows):
            yield page
            pages += 1
            if pages == 1 and self.server is not None:
                self.server.stop()

    def scan_dimension(self, page_rows: int) -> Any:
        return self._pages(page_rows)


def test_a_store_dying_during_a_reload_leaves_the_old_snapshot_serving(
    restartable_redis: RedisServer,
) -> None:
    client = restartable_redis.client()
    put_users(client, range(50), version=1)
    clock = FakeClock()
    dying = DyingRedis(
        restartable_redis.url, key_template="user:{}", value="json", schema=SCHEMA, timeout=2
    )
    source = FullCacheSource(dying, FullCache(reload_interval=60, page_rows=10), clock=clock)
    try:
        assert lookup(source, [4])[4] == ("u4", 1)
        client.close()
        dying.server = restartable_redis  # dies after the reload's first page
        clock.advance(60)
        wait_load(source)
        failed = stats(source)
        assert (failed.loads, failed.failed_loads, failed.version) == (1, 1, 1)
        assert failed.last_error is not None
        assert failed.last_error.startswith(("LookupFailed", "SourceUnavailable"))
        # The old snapshot serves, whole, with the server down.
        assert lookup(source, [4, 49]) == {4: ("u4", 1), 49: ("u49", 1)}
        dying.server = None
        restartable_redis.restart()  # empty: this server keeps no data across restarts
        client = restartable_redis.client()
        put_users(client, range(50), version=2)
        client.close()
        clock.advance(FullCache().retry_delay)  # the retry is due
        wait_load(source)
        assert lookup(source, [4])[4] == ("u4", 2)
        assert stats(source).loads == 2
    finally:
        run_sync(source.aclose, timeout=10)


def test_reloads_racing_lookups_never_show_two_versions_in_one_answer(
    redis_client: redis.Redis, full: Any
) -> None:
    keys = range(3000)
    put_users(redis_client, keys, version=1)
    clock = FakeClock()
    source = full(FullCache(reload_interval=1, page_rows=100), clock)
    lane = ColumnarLane(
        source,
        STRUCT,
        JoinSettings(
            how="left",
            on_error="fail",
            cache=None,
            timeout=20.0,
            capacity=4000,
            max_batch=4000,
        ),
        metrics=JoinMetrics(),
    )
    chunk = pa.array(list(keys), pa.int64())
    written = [1]
    raced = 0
    lock = threading.Lock()

    def chunks() -> Iterator[tuple[int, pa.Array]]:
        nonlocal raced
        for n in range(300):
            current = stats(source)
            if current is None:  # the first chunk starts the first load
                pass
            elif current.reloading:
                raced += 1  # this chunk is looked up while a reload reads the store
            elif current.version == written[-1] and len(written) < 6:
                # No load runs: write the next version to every key, then make the
                # reload due; the chunks after this one race it.
                with lock:
                    written.append(written[-1] + 1)
                    put_users(redis_client, keys, version=written[-1])
                clock.advance(1)
            yield n, chunk

    seen: list[int] = []
    for joined in lane.run(chunks()):
        assert isinstance(joined, ColumnarJoined)
        versions = set(joined.structs.field("version").to_pylist())
        assert len(versions) == 1, f"chunk {joined.tag} mixes versions {sorted(versions)}"
        seen.append(versions.pop())
    assert seen == sorted(seen)  # versions only go forward
    assert seen[-1] >= 3 and raced > 0
    assert stats(source).failed_loads == 0


def test_a_join_given_a_full_cache_reads_the_snapshot(
    redis_client: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    put_users(redis_client, range(5), version=1)
    source = make_redis(redis_server.url, key_template="user:{}", value="json", schema=SCHEMA)
    cache = FullCache()
    [joined] = lookup_chunks([(0, [1, 7, 2])], source, cache=cache, on_error="error_column")
    assert joined.rows == [("u1", 1), None, ("u2", 1)]
    redis_client.config_resetstat()
    [again] = lookup_chunks([(0, [3, 8])], source, cache=cache, on_error="error_column")
    assert again.rows == [("u3", 1), None]
    assert command_calls(redis_client, "mget") == 0 and command_calls(redis_client, "scan") == 0
    run_sync(FullCacheSource(source, cache).aclose, timeout=10)


def test_a_full_cache_refuses_a_source_that_cannot_list_its_dimension() -> None:
    class NotListable:
        schema = None

        async def lookup_many(self, keys: Any) -> Any:
            return {}

        async def aclose(self) -> None:
            return None

    with pytest.raises(ValueError, match="can list its whole dimension"):
        FullCacheSource(NotListable(), FullCache())  # type: ignore[arg-type]
