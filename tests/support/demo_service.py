"""A pytest fixture starting the demo dimension service (``enrich.demo.dimension_service``)
on the test's own loop: a real aiohttp server on a free loopback port.

Import it into a conftest: ``from tests.support.demo_service import service``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest_asyncio
from aiohttp.test_utils import TestServer

from enrich.demo.dimension_service import make_app

StartService = Callable[..., Coroutine[Any, Any, str]]


@pytest_asyncio.fixture
async def service() -> AsyncIterator[StartService]:
    """``await service(latency=..., quota=..., knee=..., slow_fraction=...)``: the demo
    dimension service on a free loopback port of the test's loop; yields its base URL.
    Stopped after the test."""
    servers: list[TestServer] = []

    async def start(latency: float = 0.0, users: int = 10_000, **load: Any) -> str:
        server = TestServer(make_app(latency, users, **load), host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    yield start
    for server in servers:
        await server.close()
