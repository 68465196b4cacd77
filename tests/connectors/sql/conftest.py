"""Fixtures of the tests every relational connector passes alike: each test runs once per
server (``store``: the session's PostgreSQL, then the session's MariaDB), its tables fresh
(the ones of ``tests/connectors/postgres/conftest.py`` and
``tests/connectors/mysql/conftest.py``), and the sources a test made closed after it. What
one server does its own way stays in that server's test folder."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from connectors.mysql import MySqlLookup
from connectors.postgres import PostgresLookup
from connectors.sql import SqlLookup
from tests.connectors.mysql.conftest import USERS as MYSQL_USERS
from tests.connectors.postgres.conftest import USERS as POSTGRES_USERS
from tests.support.sql_lookups import (
    closed_after,
    collect_driver_sockets,
)

MakeLookup = Callable[..., SqlLookup]
STORES = ("postgres", "mysql")


@dataclass(frozen=True)
class Store:
    """A real server under test and how its connector spells what the tests need.

    Attributes:
        name: the connector's kind (its messages start with it; its logger is
            ``connectors.<name>``).
        server: the embedded server (``url``, ``port``, ``user``, ``password``,
            ``database``, ``sql(script)``, ``stop()``, ``start()``).
        lookup: the connector's lookup class.
        scheme: the URL scheme.
        in_keys: how a ``query=`` compares a column with its ``:keys`` parameter.
        sleepy_query: a ``query=`` lookup of ``users`` taking five seconds a statement.
    """

    name: str
    server: Any
    lookup: type[SqlLookup]
    scheme: str
    in_keys: str
    sleepy_query: str

    @property
    def url(self) -> str:
        return str(self.server.url)

    @property
    def logger(self) -> str:
        return f"connectors.{self.name}"

    def url_of(
        self, *, password: str | None = None, port: int | None = None, database: str = ""
    ) -> str:
        """The server's URL with another password (None: none), port or database."""
        server = self.server
        user = server.user if password is None else f"{server.user}:{password}"
        where = f"127.0.0.1:{port or server.port}/{database or server.database}"
        return f"{self.scheme}://{user}@{where}"

    def insert(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """``rows`` (numbers and strings) added to ``table`` by one statement."""

        def literal(value: Any) -> str:
            if isinstance(value, str):
                return "'" + value.replace("'", "''") + "'"
            return repr(value)

        values = ", ".join(f"({', '.join(literal(v) for v in row)})" for row in rows)
        self.server.sql(f"INSERT INTO {table} VALUES {values}")

    def table(self, name: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        """A fresh table ``name`` (``columns``: SQL both servers read) holding ``rows``."""
        self.server.sql(f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} ({columns})")
        self.insert(name, rows)


def store_of(name: str, server: Any) -> Store:
    """The ``Store`` of the ``name`` connector on ``server``."""
    if name == "postgres":
        query = "SELECT id, name FROM users, pg_sleep(5) WHERE id = ANY(:keys)"
        return Store(name, server, PostgresLookup, "postgresql", "= ANY(:keys)", query)
    query = "SELECT id, name FROM users WHERE SLEEP(5) = 0 AND id IN (:keys)"
    return Store(name, server, MySqlLookup, "mysql", "IN (:keys)", query)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Store:
    """The session's server of each kind, with fresh ``users``, ``accounts`` (composite
    key) and ``orders`` (several rows per user) tables."""
    name = request.param
    server = request.getfixturevalue(f"{name}_server")
    server.sql(POSTGRES_USERS if name == "postgres" else MYSQL_USERS)
    return store_of(name, server)


@pytest.fixture(params=STORES)
def restartable_store(request: pytest.FixtureRequest) -> Store:
    """A server of each kind the test may stop and start again (PostgreSQL: one of the
    test's own; MariaDB: the session's, started again after the test if left stopped)."""
    name = request.param
    fixture = "restartable_postgres" if name == "postgres" else "mysql_server"
    return store_of(name, request.getfixturevalue(fixture))


@pytest_asyncio.fixture
async def make_lookup(store: Store) -> AsyncIterator[MakeLookup]:
    """``make_lookup(url, **settings)``: the store's lookup, its pool closed after the test."""
    async for make in closed_after(store.lookup):
        yield make


@pytest.fixture(autouse=True)
def _driver_sockets() -> Iterator[None]:
    """After every test here, what its database driver left open is collected."""
    yield
    collect_driver_sockets()
