"""The demo dimension service under load: its quota and its knee."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from enrich.demo.dimension_service import Load
from tests.protect.conftest import StartService


def test_the_quota_admits_a_tenth_of_a_second_then_the_rate() -> None:
    load = Load(quota=100)
    assert [load.admit(0.0) for _ in range(11)] == [True] * 10 + [False]
    assert load.admit(0.01)  # a hundredth of a second later: one more token
    assert not load.admit(0.01)
    assert (load.served, load.refused) == (11, 2)


def test_latency_grows_past_the_knee_only() -> None:
    load = Load(knee=200)
    load.in_flight = 200
    assert load.latency(0.005) == 0.005
    load.in_flight = 400
    assert load.latency(0.005) == pytest.approx(0.02)


@pytest.mark.asyncio
async def test_requests_over_the_quota_get_429_with_retry_after(service: StartService) -> None:
    base = await service(quota=5)
    async with aiohttp.ClientSession() as session:
        answers = []
        for uid in range(8):
            async with session.get(f"{base}/users/{uid}") as response:
                answers.append((response.status, response.headers.get("Retry-After")))
        async with session.get(f"{base}/_stats") as response:
            stats = await response.json()

    assert answers[0] == (200, None)
    assert (429, "1") in answers
    assert stats["served"] + stats["refused"] == 8 and stats["refused"] >= 1


@pytest.mark.asyncio
async def test_the_knee_is_visible_in_flight(service: StartService) -> None:
    base = await service(latency=0.05, knee=2)
    async with aiohttp.ClientSession() as session:

        async def get(uid: int) -> int:
            async with session.get(f"{base}/users/{uid}") as response:
                return response.status

        assert await asyncio.gather(*(get(uid) for uid in range(6))) == [200] * 6
        async with session.get(f"{base}/_stats") as response:
            stats = await response.json()
    assert stats["peak_in_flight"] == 6
