"""Fixtures of the store-protection tests: a real Redis, the demo service under load."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest_asyncio
from aiohttp.test_utils import TestServer

from enrich.demo.dimension_service import make_app
from tests.support.redis_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    redis_client,
    redis_server,
)

StartService = Callable[..., Coroutine[Any, Any, str]]


@pytest_asyncio.fixture
async def service() -> AsyncIterator[StartService]:
    """``await service(latency=..., quota=..., knee=...)``: the demo dimension service on
    a free loopback port of the test's loop; yields its base URL. Stopped after the test."""
    servers: list[TestServer] = []

    async def start(latency: float = 0.0, users: int = 10_000, **load: Any) -> str:
        server = TestServer(make_app(latency, users, **load), host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    yield start
    for server in servers:
        await server.close()
