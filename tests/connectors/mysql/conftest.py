"""Fixtures of the MySQL/MariaDB connector tests: tables on the session's real server, and
sources closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio

from connectors.mysql import MySqlLookup
from tests.support.mysql_server import MySqlServer
from tests.support.sql_lookups import closed_after, collect_driver_sockets

MakeLookup = Callable[..., MySqlLookup]


USERS = """
DROP TABLE IF EXISTS users, accounts, orders;
CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT, tier VARCHAR(10), credit DOUBLE);
INSERT INTO users VALUES (1, 'Ada', 'gold', 12.5), (2, 'Bob', 'silver', NULL),
                         (3, NULL, NULL, NULL), (4, 'Dee', 'gold', 0.25);
CREATE TABLE accounts (tenant VARCHAR(8), id INT, name TEXT, PRIMARY KEY (tenant, id));
INSERT INTO accounts VALUES ('eu', 1, 'eu-one'), ('us', 1, 'us-one'), ('eu', 2, 'eu-two');
CREATE TABLE orders (user_id BIGINT, total DECIMAL(10,2), item TEXT, KEY (user_id));
INSERT INTO orders VALUES (1, 10.50, 'pen'), (1, 3.00, 'ink'), (2, 7.25, 'pad');
"""


@pytest.fixture
def tables(mysql_server: MySqlServer) -> MySqlServer:
    """The shared server with fresh ``users``, ``accounts`` (composite key) and
    ``orders`` (several rows per user) tables."""
    mysql_server.sql(USERS)
    return mysql_server


@pytest_asyncio.fixture
async def make_lookup() -> AsyncIterator[MakeLookup]:
    """``make_lookup(url, **settings)``: a MySqlLookup whose pool is closed after the test."""
    async for make in closed_after(MySqlLookup):
        yield make


@pytest.fixture(autouse=True)
def _driver_sockets() -> Iterator[None]:
    """After every test here, what its database driver left open is collected."""
    yield
    collect_driver_sockets()
