"""Failures MariaDB meets its own way: a wrong password found on construction (reading the
columns), a missing database. The failures every relational connector meets alike (a
restart mid-job, a wrong password, an unreachable server, a statement time limit) are
``tests/connectors/sql/test_failures.py``'s, run on this server too."""

from __future__ import annotations

import pytest

from connectors.mysql import MySqlLookup
from enrich import SourceUnavailable
from tests.connectors.mysql.conftest import MakeLookup
from tests.connectors.sql.test_failures import WRONG, assert_no_secret, texts_of
from tests.support.mysql_server import MySqlServer

pytestmark = pytest.mark.timeout(120)


def test_wrong_password_without_schema_fails_on_construction_in_one_line(
    tables: MySqlServer,
) -> None:
    with pytest.raises(SourceUnavailable) as caught:
        MySqlLookup(tables.url.replace(tables.password, WRONG), table="users", key="id")

    assert caught.value.kind == "auth" and "\n" not in str(caught.value)
    assert_no_secret(texts_of(caught.value), WRONG, tables.password)


@pytest.mark.asyncio
async def test_missing_database_is_named(tables: MySqlServer, make_lookup: MakeLookup) -> None:
    admin = tables.admin()  # a grant on a database that does not exist: 1049, not 1044
    try:
        admin.cursor().execute("GRANT ALL ON `nodb`.* TO 'enrich'@'%'")
    finally:
        admin.close()
    url = tables.url.rsplit("/", 1)[0] + "/nodb"
    users = make_lookup(url, table="users", key="id", schema="name string")

    with pytest.raises(SourceUnavailable, match="database 'nodb' does not exist"):
        await users.lookup_many([1])
