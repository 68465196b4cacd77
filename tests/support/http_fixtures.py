"""Pytest fixtures for HTTP connector tests; import them into a ``conftest.py``.

``http_server`` is one :class:`HttpTestServer` per test session (starting a server per
test would dominate the run time), reset before each test so no script or request log
leaks from one test into the next.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.http_server import HttpTestServer


@pytest.fixture(scope="session")
def http_server_session() -> Iterator[HttpTestServer]:
    server = HttpTestServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_server(http_server_session: HttpTestServer) -> Iterator[HttpTestServer]:
    http_server_session.reset()
    yield http_server_session
    http_server_session.reset()


@pytest.fixture(scope="session")
def other_http_server() -> Iterator[HttpTestServer]:
    """A second server on another port (another origin), reset before each use."""
    server = HttpTestServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def elsewhere(other_http_server: HttpTestServer) -> Iterator[HttpTestServer]:
    """``other_http_server``, reset before and after the test."""
    other_http_server.reset()
    yield other_http_server
    other_http_server.reset()
