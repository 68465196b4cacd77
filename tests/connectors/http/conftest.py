"""Fixtures of the HTTP connector tests: the scripted server and sources closed after use."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from connectors.http import HttpLookup
from tests.support.http_fixtures import (
    elsewhere,
    http_server,
    http_server_session,
    other_http_server,
)
from tests.support.http_server import HttpTestServer

__all__ = (
    "elsewhere",
    "http_server",
    "http_server_session",
    "make_source",
    "other_http_server",
)

MakeSource = Callable[..., HttpLookup]


@pytest_asyncio.fixture
async def make_source(http_server: HttpTestServer) -> AsyncIterator[MakeSource]:
    """``make_source(template="/users/{}", **settings)``: a source on the test server.

    Every source made is closed when the test ends, on the test's own loop, so no session
    outlives its test (filterwarnings=error turns a leaked one into a failure).
    """
    made: list[HttpLookup] = []

    def make(template: str = "/users/{}", **settings: Any) -> HttpLookup:
        settings.setdefault("schema", "name string, age int")
        source = HttpLookup(http_server.url(template), **settings)
        made.append(source)
        return source

    yield make
    for source in made:
        await source.aclose()
