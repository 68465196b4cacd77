"""Fixtures of the PostgreSQL connector tests: tables on the session's real server, and
sources closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from connectors.postgres import PostgresLookup
from enrich.demo.postgres_server import PostgresServer
from tests.support.sql_lookups import closed_after

MakeLookup = Callable[..., PostgresLookup]


USERS = """
DROP TABLE IF EXISTS users, accounts, orders CASCADE;
CREATE TABLE users (id bigint PRIMARY KEY, name text, tier varchar(10), credit double precision);
INSERT INTO users VALUES (1, 'Ada', 'gold', 12.5), (2, 'Bob', 'silver', NULL),
                         (3, NULL, NULL, NULL), (4, 'Dee', 'gold', 0.25),
                         (5, E'a,"b\nc', '', 'NaN'), (6, 'Eve', 'x', '-Infinity');
CREATE TABLE accounts (tenant text, id integer, name text, PRIMARY KEY (tenant, id));
INSERT INTO accounts VALUES ('eu', 1, 'eu-one'), ('us', 1, 'us-one'), ('eu', 2, 'eu-two');
CREATE TABLE orders (user_id bigint, total numeric(10,2), item text);
INSERT INTO orders VALUES (1, 10.50, 'pen'), (1, 3.00, 'ink'), (2, 7.25, 'pad');
"""


@pytest.fixture
def tables(postgres_server: PostgresServer) -> PostgresServer:
    """The shared server with fresh ``users``, ``accounts`` (composite key) and
    ``orders`` (several rows per user) tables."""
    postgres_server.sql(USERS)
    return postgres_server


@pytest_asyncio.fixture
async def make_lookup() -> AsyncIterator[MakeLookup]:
    """``make_lookup(url, **settings)``: a PostgresLookup whose pool is closed after the test."""
    async for make in closed_after(PostgresLookup):
        yield make
