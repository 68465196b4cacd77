"""Fixtures of the Redis connector tests: real servers, and sources closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from connectors.redis import RedisLookup
from tests.support.redis_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    cluster_client,
    redis_client,
    redis_cluster,
    redis_server,
    restartable_redis,
    secured_redis,
    tls_redis,
)

MakeLookup = Callable[..., RedisLookup]


@pytest_asyncio.fixture
async def make_lookup() -> AsyncIterator[MakeLookup]:
    """``make_lookup(url, **settings)``: a RedisLookup whose client is closed after the test."""
    made: list[RedisLookup] = []

    def make(url: str, **settings: Any) -> RedisLookup:
        source = RedisLookup(url, **settings)
        made.append(source)
        return source

    yield make
    for source in made:
        await source.aclose()
