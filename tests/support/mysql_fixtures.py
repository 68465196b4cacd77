"""pytest fixtures giving tests a real MariaDB/MySQL server (``tests.support.mysql_server``).

``mysql_server`` is shared by the session (a test may ``stop()``, ``start()`` or
``restart()`` it: the port and the data stay, and the fixture starts it again for the
next test if a test left it stopped); ``mysql_url`` is its
``mysql://user:pw@127.0.0.1:PORT/db``. Without a server binary both skip, saying how to
get one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .mysql_server import MySqlServer, MySqlUnavailable

__all__ = ("mysql_server", "mysql_session_server", "mysql_url", "restartable_mysql", "tls_mysql")


@pytest.fixture(scope="session")
def mysql_session_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MySqlServer]:
    try:
        server = MySqlServer(tmp_path_factory.mktemp("mysql")).start()
    except MySqlUnavailable as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


@pytest.fixture
def mysql_server(mysql_session_server: MySqlServer) -> Iterator[MySqlServer]:
    """The session's server, running: ``.url``, ``.execute(sql, args)``, ``.connect()``,
    ``.stop()``, ``.start()``, ``.restart()``, ``.kill()``."""
    if not mysql_session_server.is_running():
        mysql_session_server.start()
    yield mysql_session_server
    if not mysql_session_server.is_running():
        mysql_session_server.start()


@pytest.fixture(scope="session")
def mysql_url(mysql_session_server: MySqlServer) -> str:
    """``mysql://user:pw@127.0.0.1:PORT/db`` of the session's server."""
    return mysql_session_server.url


def _own(directory: Path, **settings: Any) -> MySqlServer:
    try:
        return MySqlServer(directory, **settings).start()
    except MySqlUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def restartable_mysql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MySqlServer]:
    """A server of this test's own, which it may stop, kill and restart."""
    server = _own(tmp_path_factory.mktemp("mysql-own"))
    yield server
    server.stop()


@pytest.fixture
def tls_mysql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MySqlServer]:
    """A server of this test's own that also serves TLS (``.ca_file`` signed its
    certificate, valid for 127.0.0.1)."""
    server = _own(tmp_path_factory.mktemp("mysql-tls"), tls=True)
    yield server
    server.stop()
