"""Failures PostgreSQL names its own way: a missing database. The failures every
relational connector meets alike (a restart mid-job, a wrong password, an unreachable
server, a statement timeout) are ``tests/connectors/sql/test_failures.py``'s, run on this
server too."""

from __future__ import annotations

import pytest

from enrich import SourceUnavailable
from enrich.demo.postgres_server import PostgresServer
from tests.connectors.postgres.conftest import MakeLookup

pytestmark = pytest.mark.timeout(120)


@pytest.mark.asyncio
async def test_missing_database_is_named(tables: PostgresServer, make_lookup: MakeLookup) -> None:
    url = tables.url.rsplit("/", 1)[0] + "/nodb"
    users = make_lookup(url, table="users", key="id", schema="name string")

    with pytest.raises(SourceUnavailable, match="database 'nodb' does not exist"):
        await users.lookup_many([1])
