"""Fixtures of the end-to-end lookup-join tests: real Redis and HTTP servers, and sources
closed on the runtime loop after each test (``lookup_rows`` runs there, so that is where
their clients and sessions live)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from enrich.engine.runtime import run_sync
from tests.support.http_fixtures import http_server, http_server_session
from tests.support.http_server import HttpTestServer
from tests.support.redis_fixtures import (
    redis_client,
    redis_server,
    restartable_redis,
    secured_redis,
)

__all__ = (
    "command_calls",
    "http_server",
    "http_server_session",
    "make_http",
    "make_redis",
    "redis_client",
    "redis_server",
    "restartable_redis",
    "secured_redis",
    "server_stat",
)

MakeRedis = Callable[..., RedisLookup]
MakeHttp = Callable[..., HttpLookup]


@pytest.fixture
def make_redis() -> Iterator[MakeRedis]:
    """``make_redis(url, **settings)``: a RedisLookup closed on the runtime loop afterwards."""
    made: list[RedisLookup] = []

    def make(url: str, **settings: Any) -> RedisLookup:
        source = RedisLookup(url, **settings)
        made.append(source)
        return source

    yield make
    for source in made:
        run_sync(source.aclose, timeout=10)


@pytest.fixture
def make_http(http_server: HttpTestServer) -> Iterator[MakeHttp]:
    """``make_http(template="/users/{}", **settings)``: an HttpLookup on the test server,
    its session closed on the runtime loop afterwards."""
    made: list[HttpLookup] = []

    def make(template: str = "/users/{}", **settings: Any) -> HttpLookup:
        settings.setdefault("schema", "name string, age int")
        source = HttpLookup(http_server.url(template), **settings)
        made.append(source)
        return source

    yield make
    for source in made:
        run_sync(source.aclose, timeout=10)


def command_calls(client: redis.Redis, command: str) -> int:
    """How many times the server ran ``command`` since the last CONFIG RESETSTAT."""
    stats = client.info("commandstats")
    return int(stats.get(f"cmdstat_{command.lower()}", {}).get("calls", 0))


def server_stat(client: redis.Redis, name: str) -> int:
    """A counter of ``INFO stats`` (``keyspace_hits``, ``keyspace_misses``, ...)."""
    return int(client.info("stats")[name])
