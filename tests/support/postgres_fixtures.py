"""pytest fixtures giving tests a real PostgreSQL (see ``enrich.demo.postgres_server``).

``postgres_server`` is shared by the session (``.url``, ``.sql(...)``, ``stop()``,
``start()``, ``restart()``: a test that stops it starts it again); ``postgres_url`` is its
URL, ``postgresql://enrich:<password>@127.0.0.1:PORT/enrich``; ``restartable_postgres``
is a server of the test's own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from enrich.demo.postgres_server import DEFAULT_PASSWORD, PostgresServer, PostgresUnavailable

__all__ = ("POSTGRES_PASSWORD", "postgres_server", "postgres_url", "restartable_postgres")

POSTGRES_PASSWORD = DEFAULT_PASSWORD


def _started() -> PostgresServer:
    try:
        return PostgresServer().start()
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server shared by the session."""
    server = _started()
    yield server
    server.close()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """The shared server's URL, password included."""
    return postgres_server.url


@pytest.fixture
def restartable_postgres() -> Iterator[PostgresServer]:
    """A server of this test's own, which it may stop and restart."""
    server = _started()
    yield server
    server.close()
