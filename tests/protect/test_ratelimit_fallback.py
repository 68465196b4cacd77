"""The job limiter through an outage of its Redis, on a fake clock: the fallback paces its
permits at every moment, Redis is asked again each second, and used again at once."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from enrich.protect import JobRateLimit
from enrich.protect.limiter import JobLimiter, take_waits
from enrich.testing import FakeClock, drive
from tests.support.arrivals import busiest_window

pytestmark = pytest.mark.timeout(30)


class ScriptedRedis:
    """The limiter's Redis client, scripted: down (every call raises) or up (grants all
    that is asked). Records when it was asked."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.down = False
        self.asked: list[float] = []

    def register_script(self, script: str) -> Any:
        return self.call

    async def call(self, keys: list[str], args: list[float]) -> list[int]:
        self.asked.append(self.clock.now())
        if self.down:
            raise ConnectionError("Connection refused")
        return [int(args[2]), 0]

    async def aclose(self) -> None:
        pass


@pytest.mark.asyncio
async def test_an_outage_paces_the_fallback_and_asks_redis_again_each_second() -> None:
    clock = FakeClock()
    redis = ScriptedRedis(clock)
    redis.down = True
    settings = JobRateLimit(rate=800, redis_url="redis://limits:6379/0", key="k", fallback_rate=10)
    limiter = JobLimiter(settings, asyncio.get_running_loop(), clock=clock, client=redis)
    granted: list[float] = []

    async def request() -> None:
        await limiter.acquire(1)
        granted.append(clock.now())

    waiting = [asyncio.ensure_future(request()) for _ in range(200)]
    try:
        await drive(clock, asyncio.gather(*waiting[:60]))  # 60 permits in the outage
        outage = clock.now()
        redis.down = False  # Redis is back
        await drive(clock, asyncio.gather(*waiting))
    finally:
        await limiter.aclose()

    during = [at for at in granted if at <= outage]
    # A batch is min(8, 10 / 10) = 1 permit: 10 a second at every moment, never the
    # whole waiting demand at once after one long sleep.
    assert busiest_window(during, 1.0) <= 10 + 1
    assert len(during) == 60 and outage >= 5.0
    asked = [at for at in redis.asked if at <= outage]
    assert all(0.99 <= later - earlier <= 1.01 for earlier, later in itertools.pairwise(asked))
    assert len(asked) >= outage - 1  # about once a second
    assert granted[-1] - outage <= 1.0  # used again within a second, the rest at once
    stats = limiter.statistics()
    assert stats.outages == 1 and stats.fallback == 60 and stats.granted >= 140
    # Every request waited from 0 to its grant: the metrics' waits, taken once.
    assert take_waits(settings) == (200, pytest.approx(sum(granted)))
    assert take_waits(settings) == (0, 0.0)
