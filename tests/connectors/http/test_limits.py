"""Concurrency and rate limits, as observed by the server."""

from __future__ import annotations

import pytest

from tests.connectors.http.conftest import MakeSource
from tests.support.arrivals import busiest_window
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


@pytest.mark.asyncio
async def test_rate_limit_spreads_request_starts(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    keys = [f"u{i}" for i in range(40)]

    await make_source(rate_limit=20).lookup_many(keys)

    starts = [request.started for request in http_server.requests]
    assert len(starts) == 40
    # 20/s with bursts of 2: at most 22 in any second as the service counts them; 1.5x
    # leaves room for a busy machine's stalls (arrivals bunch after one). Unthrottled,
    # all 40 arrive within a few milliseconds.
    assert busiest_window(starts, 1.0) <= 30


@pytest.mark.asyncio
async def test_a_slow_rate_limit_sends_one_request_at_a_time(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    await make_source(rate_limit=8).lookup_many([f"u{i}" for i in range(8)])

    starts = [request.started for request in http_server.requests]
    assert len(starts) == 8
    # One request every 1/8 s (a burst of one): 2 in any quarter of a second, 4 at most
    # when a stall of the client or the service bunched them; unthrottled, 8 at once.
    assert busiest_window(starts, 0.25) <= 4
