"""The job-wide rate limit against a real Redis: one budget for several processes' limiters,
and lookups that go on when the limiter's Redis is gone."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import redis.asyncio as aioredis

from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from enrich.demo.local import free_port
from enrich.protect import JobRateLimit
from enrich.protect.limiter import JobLimiter
from tests.protect.conftest import StartService
from tests.support.arrivals import busiest_window
from tests.support.http_server import HttpTestServer


def limiter(url: str, rate: float, *, patient: bool = False, **settings: Any) -> JobLimiter:
    """A limiter as one process of the job would hold it (a client of its own). A
    ``patient`` one waits for its Redis as long as a busy machine needs, instead of
    falling back after 0.25 s: for tests of the shared budget itself."""
    limit = JobRateLimit(rate=rate, redis_url=url, key="enrich:rate:test", **settings)
    client = None
    if patient:
        client = aioredis.Redis.from_url(url, socket_timeout=60, socket_connect_timeout=60)
    return JobLimiter(limit, asyncio.get_running_loop(), client=client)


@pytest.mark.asyncio
async def test_the_bucket_grants_its_burst_then_says_how_long_to_wait(
    redis_server: Any, redis_client: Any
) -> None:
    one = limiter(redis_server.url, rate=1.0, burst_seconds=1.0)
    try:
        first = await one._ask(5)
        second = await one._ask(5)
    finally:
        await one.aclose()

    assert first == (1, 0)  # a second's worth of a rate of 1/s
    assert second[0] == 0 and 0 < second[1] <= 1_000_000
    assert 0 < redis_client.pttl("enrich:rate:test") <= 3000


@pytest.mark.asyncio
async def test_four_processes_share_one_budget(redis_server: Any, redis_client: Any) -> None:
    rate, each = 200.0, 60
    limiters = [limiter(redis_server.url, rate, patient=True) for _ in range(4)]

    async def spend(one: JobLimiter) -> None:
        for _ in range(each):
            await one.acquire(1)

    started = server_time(redis_client)
    try:
        await asyncio.gather(*(spend(one) for one in limiters))
    finally:
        elapsed = server_time(redis_client) - started
        for one in limiters:
            await one.aclose()

    # The bucket grants at most rate * (t + burst) + one batch per process held unspent,
    # by the server's clock: 240 permits need at least (240 - 20 - 4) / 200 s of it.
    assert elapsed >= (4 * each - rate * 0.1 - 4) / rate
    assert sum(one.statistics().granted for one in limiters) >= 4 * each
    assert sum(one.statistics().outages for one in limiters) == 0


def server_time(client: Any) -> float:
    """Now, by the limiter's Redis's clock (the one its bucket runs on)."""
    seconds, micros = client.time()
    return float(seconds) + micros / 1e6


@pytest.mark.asyncio
async def test_an_unreachable_limiter_falls_back_and_fails_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    one = limiter(f"redis://127.0.0.1:{free_port()}/0", rate=100.0, fallback_rate=10_000.0)
    try:
        with caplog.at_level(logging.WARNING, logger="enrich.protect"):
            await asyncio.gather(*(one.acquire(1) for _ in range(50)))
    finally:
        await one.aclose()

    stats = one.statistics()
    assert stats.granted == 0 and stats.outages >= 1 and stats.fallback >= 50
    assert "keeping to 10000 permits/s in this process" in caplog.text


@pytest.mark.asyncio
async def test_http_lookups_stay_under_the_quota_with_a_job_rate_limit(
    http_server: HttpTestServer, redis_server: Any, redis_client: Any
) -> None:
    rate = 50.0
    keys = [str(key) for key in range(150)]
    for key in keys:
        http_server.data[key] = {"name": f"user-{key}"}
    unlimited = HttpLookup(http_server.url("/users/{}"), schema="name string")
    limited = HttpLookup(
        http_server.url("/users/{}"),
        schema="name string",
        job_rate_limit=JobRateLimit(rate=rate, redis_url=redis_server.url),
    )
    try:
        await unlimited.lookup_many(keys)
        over = [request.started for request in http_server.requests]
        under = await limited.lookup_many(keys)
        limited_starts = [request.started for request in http_server.requests[len(keys) :]]
    finally:
        await unlimited.aclose()
        await limited.aclose()

    # What the service counted: every second of the limited run within the quota (the
    # bucket's bound is rate * 1.1 + a batch; 1.5x leaves room for the service's own
    # stalls on a busy machine), where without the limit it would not hold.
    assert busiest_window(over, 1.0) > 1.5 * rate
    assert busiest_window(limited_starts, 1.0) <= 1.5 * rate
    assert under == {key: (f"user-{key}",) for key in keys}


@pytest.mark.asyncio
async def test_http_lookups_go_on_when_the_limiter_is_gone(service: StartService) -> None:
    base = await service()
    source = HttpLookup(
        base + "/users/{}",
        schema="name string",
        job_rate_limit=JobRateLimit(
            rate=50, redis_url=f"redis://127.0.0.1:{free_port()}/0", fallback_rate=5000
        ),
    )
    try:
        found = await source.lookup_many(list(range(40)))
    finally:
        await source.aclose()
    assert found == {key: (f"user-{key}",) for key in range(40)}


@pytest.mark.asyncio
async def test_redis_lookups_draw_keys_from_their_own_redis_by_default(
    redis_server: Any, redis_client: Any
) -> None:
    redis_client.mset({f"user:{i}": f'{{"name": "u{i}"}}' for i in range(30)})
    source = RedisLookup(
        redis_server.url,
        key_template="user:{}",
        value="json",
        schema="name string",
        job_rate_limit=1000,
        max_batch=10,
    )
    try:
        found = await source.lookup_many(list(range(30)))
    finally:
        await source.aclose()

    assert found == {i: (f"u{i}",) for i in range(30)}
    buckets = redis_client.keys("enrich:rate:*")
    assert len(buckets) == 1 and redis_client.pttl(buckets[0]) > 0
    assert "job_rate_limit=JobRateLimit(rate=1000" in repr(source)
