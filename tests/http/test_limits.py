"""Concurrency and rate limits, as observed by the server."""

from __future__ import annotations

import itertools

import pytest

from tests.http.conftest import MakeSource
from tests.support.http_server import BATCH_PATH, HttpTestServer


@pytest.mark.asyncio
async def test_per_key_requests_run_concurrently(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    keys = [f"u{i}" for i in range(20)]
    http_server.set_default_latency(0.1)

    await make_source().lookup_many(keys)

    assert http_server.max_in_flight > 5


@pytest.mark.asyncio
async def test_max_connections_bounds_requests_in_flight(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    keys = [f"u{i}" for i in range(40)]
    for key in keys:
        http_server.data[key] = {"name": key}
    http_server.set_default_latency(0.03)

    result = await make_source(max_connections=4).lookup_many(keys)

    assert result == {key: (key, None) for key in keys}
    assert 2 <= http_server.max_in_flight <= 4


@pytest.mark.asyncio
async def test_max_connections_bounds_batch_posts_in_flight(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.set_default_latency(0.03)
    source = make_source(batch_url=http_server.url(BATCH_PATH), max_batch=1, max_connections=2)

    await source.lookup_many([f"u{i}" for i in range(12)])

    assert len(http_server.requests) == 12
    assert http_server.max_in_flight <= 2


def _busiest_window(starts: list[float], width: float) -> int:
    starts = sorted(starts)
    best = 0
    for i, start in enumerate(starts):
        best = max(best, sum(1 for t in starts[i:] if t - start < width))
    return best


@pytest.mark.asyncio
async def test_rate_limit_spreads_request_starts(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    keys = [f"u{i}" for i in range(40)]

    await make_source(rate_limit=50).lookup_many(keys)

    starts = [request.started for request in http_server.requests]
    assert len(starts) == 40
    # 50/s lets 5 requests start per 100 ms. The bound is loose: the first burst opens new
    # connections and can reach the server as late as the next burst (reusing them).
    # Unthrottled, all 40 arrive within a few milliseconds.
    assert _busiest_window(starts, 0.1) <= 12
    # 35 requests after the first burst of 5, at 50/s: at least 0.7 s (minus noise).
    assert max(starts) - min(starts) >= 0.6


@pytest.mark.asyncio
async def test_a_slow_rate_limit_sends_one_request_at_a_time(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    await make_source(rate_limit=8).lookup_many(["a", "b", "c"])

    starts = sorted(request.started for request in http_server.requests)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert min(gaps) >= 0.1  # 1/8 s apart, minus noise
