"""pytest fixtures giving tests a real PostgreSQL (see ``enrich.demo.postgres_server``).

``postgres_server`` is shared by the session (``.url``, ``.sql(...)``, ``stop()``,
``start()``, ``restart()``: a test that stops it starts it again); ``postgres_url`` is its
URL, ``postgresql://user:pw@127.0.0.1:PORT/db`` (the login the issue's examples use);
``restartable_postgres`` is a server of the test's own, with the same login.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from enrich.demo.postgres_server import PostgresServer, PostgresUnavailable

__all__ = ("LOGIN", "postgres_server", "postgres_url", "restartable_postgres")

LOGIN = {"user": "user", "password": "pw", "database": "db"}


def _started() -> PostgresServer:
    try:
        return PostgresServer(**LOGIN).start()
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
