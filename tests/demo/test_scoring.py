"""The demo service's scoring endpoints (``POST /score``, ``POST /score/_batch``), on a
real aiohttp server: answers, bad bodies, the deterministic tail, quota, knee, stats."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from enrich.demo.scoring import canonical, score
from enrich.demo.service_load import Tail
from tests.support.demo_service import StartService

ROWS = [{"user_id": n, "amount": n * 0.25, "country": ("fr", "de", "us")[n % 3]} for n in range(40)]


@pytest_asyncio.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def post(session: aiohttp.ClientSession, url: str, **body: Any) -> tuple[int, Any]:
    async with session.post(url, **body) as response:
        return response.status, await response.json()


async def stats(session: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    async with session.get(f"{base}/_stats") as response:
        answer: dict[str, Any] = await response.json()
    return answer


def test_a_score_is_a_function_of_the_columns_not_of_their_spelling() -> None:
    assert canonical({"b": 1, "a": "é"}) == canonical({"a": "é", "b": 1})
    answers = [score(row) for row in ROWS]
    assert answers == [score(dict(reversed(row.items()))) for row in ROWS]
    assert all(0 <= a["score"] < 1 and a["label"] in {"low", "medium", "high"} for a in answers)
    assert len({a["score"] for a in answers}) == len(ROWS)


def test_the_tail_takes_its_fraction_of_bodies_the_same_ones_every_time() -> None:
    tail = Tail(latency=0.005, slow_latency=0.5, slow_fraction=0.01)
    bodies = [canonical({"order_id": n, "amount": n * 0.5}) for n in range(20_000)]
    slow = [n for n, body in enumerate(bodies) if tail.is_slow_body(body)]
    assert 150 <= len(slow) <= 250  # 1% of 20,000, give or take the hash
    assert slow == [n for n, body in enumerate(bodies) if tail.is_slow_body(body)]
    assert Tail(latency=0.005).is_slow_body(bodies[slow[0]]) is False
    assert tail.of(True) == 0.5 and tail.of(False) == 0.005
    with pytest.raises(ValueError, match="slow_fraction must be within"):
        Tail(slow_fraction=1.5)


@pytest.mark.asyncio
async def test_score_answers_the_columns_score(
    service: StartService, session: aiohttp.ClientSession
) -> None:
    base = await service()
    row = {"user_id": 7, "amount": 12.5, "country": "fr"}
    assert await post(session, f"{base}/score", json=row) == (200, score(row))
    # The same columns spelled otherwise on the wire: the same answer.
    spelled = b'{ "country": "fr", "amount": 12.5, "user_id": 7 }'
    assert await post(session, f"{base}/score", data=spelled) == (200, score(row))
    counted = await stats(session, base)
    assert (counted["served"], counted["rows"]) == (2, 2)


@pytest.mark.asyncio
async def test_a_batch_of_n_gets_n_answers_in_its_order(
    service: StartService, session: aiohttp.ClientSession
) -> None:
    base = await service()
    status, answers = await post(session, f"{base}/score/_batch", json=ROWS)
    assert status == 200
    assert answers == [score(row) for row in ROWS]
    assert await post(session, f"{base}/score/_batch", json=[]) == (200, [])
    counted = await stats(session, base)
    assert (counted["served"], counted["rows"]) == (2, len(ROWS))


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/score", b'{"user_id": 7,', "body is not JSON: Expecting property name"),
        ("/score", b"\xff\xfe", "body is not JSON"),
        ("/score", b"[1, 2]", "body must be a JSON object of columns, got a list ([1, 2])"),
        ("/score/_batch", b"{oops", "body is not JSON"),
        ("/score/_batch", b'{"user_id": 7}', "must be a JSON list of objects of columns"),
        (
            "/score/_batch",
            b'[{"user_id": 1}, {"user_id": 2}, "three"]',
            'item 2 of the list must be a JSON object of columns, got a string ("three")',
        ),
    ],
)
async def test_a_bad_body_is_refused_at_once_naming_the_problem(
    service: StartService, session: aiohttp.ClientSession, path: str, body: bytes, named: str
) -> None:
    base = await service(latency=30.0)  # answered at once, or the client gives up
    status, answer = await post(
        session, base + path, data=body, timeout=aiohttp.ClientTimeout(total=10)
    )
    assert status == 400
    assert named in answer["error"]
    assert (await stats(session, base))["rows"] == 0


@pytest.mark.asyncio
async def test_the_tail_slows_the_bodies_it_chose(
    service: StartService, session: aiohttp.ClientSession
) -> None:
    base = await service(slow_fraction=0.05, slow_latency=0.0)
    rows = [{"order_id": n, "amount": n * 0.5} for n in range(200)]
    await asyncio.gather(*(post(session, f"{base}/score", json=row) for row in rows))
    chosen = Tail(slow_fraction=0.05)
    expected = sum(chosen.is_slow_body(canonical(row)) for row in rows)
    assert expected > 0
    assert (await stats(session, base))["slow"] == expected

    slow = await service(slow_fraction=1.0, slow_latency=0.2)
    await post(session, f"{slow}/score/_batch", json=rows[:3])
    counted = await stats(session, slow)
    assert counted["slow"] == 3 and counted["p50"] >= 0.2  # as the service timed itself


@pytest.mark.asyncio
async def test_quota_knee_and_a_fresh_count(
    service: StartService, session: aiohttp.ClientSession
) -> None:
    limited = await service(quota=3)
    statuses = [(await post(session, f"{limited}/score", json=row))[0] for row in ROWS[:6]]
    assert statuses[0] == 200 and 429 in statuses
    assert (await stats(session, limited))["refused"] == statuses.count(429)

    base = await service(latency=0.05, knee=2)
    answers = await asyncio.gather(*(post(session, f"{base}/score", json=r) for r in ROWS[:6]))
    assert [status for status, _ in answers] == [200] * 6
    counted = await stats(session, base)
    assert counted["peak_in_flight"] == 6
    assert counted["p99"] >= 0.05 * (6 / 2) ** 2  # the sixth waited past the knee
    async with session.delete(f"{base}/_stats") as response:
        assert response.status == 200
    fresh = await stats(session, base)
    assert (fresh["served"], fresh["rows"], fresh["peak_in_flight"]) == (0, 0, 0)
