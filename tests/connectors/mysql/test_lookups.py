"""MySqlLookup against a real MariaDB, where MariaDB has its own ways: a column type no
field maps to, a missing column's message, TLS settings. What every relational connector
answers alike is ``tests/connectors/sql/test_lookups.py``'s, run on this server too."""

from __future__ import annotations

import pytest

from connectors.mysql import MySqlLookup
from connectors.sql import UnmappableColumn
from enrich import LookupFailed
from tests.connectors.mysql.conftest import MakeLookup
from tests.support.mysql_server import MySqlServer

pytestmark = pytest.mark.timeout(60)
SCHEMA = "name string, tier string, credit double"


def test_an_unmappable_column_is_named(tables: MySqlServer) -> None:
    tables.sql("DROP TABLE IF EXISTS shapes; CREATE TABLE shapes (id INT, g GEOMETRY)")

    with pytest.raises(UnmappableColumn, match="column 'g' of 'shapes' has type 'geometry'"):
        MySqlLookup(tables.url, table="shapes", key="id")


@pytest.mark.asyncio
async def test_a_missing_column_of_the_schema_is_a_final_one_line_error(
    tables: MySqlServer, make_lookup: MakeLookup
) -> None:
    users = make_lookup(tables.url, table="users", key="id", schema="nickname string")

    with pytest.raises(LookupFailed) as caught:
        await users.lookup_many([1])

    assert caught.value.kind == "schema" and not caught.value.retryable
    assert "Unknown column 'nickname'" in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_ssl_mode_is_named() -> None:
    with pytest.raises(ValueError, match="ssl-mode must be one of"):
        MySqlLookup("mysql://u:pw@127.0.0.1:1/db?ssl-mode=sometimes", table="t", schema="a int")
