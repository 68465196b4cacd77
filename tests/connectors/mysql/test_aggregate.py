"""A batch's rows as one JSON document (connectors.mysql.aggregate): used for scalar
schemas, exact for every value they hold, whole past MariaDB's default 1 MiB bound of
JSON_ARRAYAGG; other schemas read rows."""

from __future__ import annotations

import pytest

from connectors.mysql import pool
from tests.connectors.mysql.conftest import MakeLookup
from tests.support.mysql_server import MySqlServer

pytestmark = pytest.mark.timeout(60)

TRICKY = ['quote " and \\ backslash', "naïve ☃ 🐍", "", "tab\tnew\nline", "'single'"]


@pytest.mark.asyncio
async def test_scalar_values_come_back_exactly_through_json(
    mysql_server: MySqlServer, make_lookup: MakeLookup
) -> None:
    mysql_server.sql(
        "DROP TABLE IF EXISTS scalars;"
        "CREATE TABLE scalars (k VARCHAR(10), s TEXT, bi BIGINT, d DOUBLE, f FLOAT,"
        " b BOOLEAN, ti TINYINT, KEY (k))"
    )
    rows = [
        ("a", TRICKY[0], 2**63 - 1, 1 / 3, 1.5, True, -128),
        ("a", TRICKY[1], -(2**63), 1e300, None, False, 127),  # a second row of 'a': 1:N
        ("b", TRICKY[2], 0, 2.5e-308, 0.25, None, 0),
        ("c", TRICKY[3], None, 123456789.12345679, -2.0, True, None),
        ("d", TRICKY[4], 7, None, 3.0, False, 1),
        ("e", None, None, None, None, None, None),
    ]
    mysql_server.execute("INSERT INTO scalars VALUES (%s, %s, %s, %s, %s, %s, %s)", rows, many=True)
    schema = "s string, bi bigint, d double, f float, b boolean, ti tinyint"
    source = make_lookup(mysql_server.url, table="scalars", key="k", schema=schema)

    found = await source.lookup_many(["a", "b", "c", "d", "e", "zz"])

    plan = next(iter(pool.handle_for(source._settings).plans.values()))
    assert plan.aggregated
    assert sorted(found["a"], key=repr) == sorted(
        [(r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows[:2]], key=repr
    )
    for key, row in zip("bcde", rows[2:], strict=True):
        assert found[key] == row[1:], key
    assert found["zz"] is None


@pytest.mark.asyncio
async def test_a_batch_past_one_mebibyte_comes_back_whole(
    mysql_server: MySqlServer, make_lookup: MakeLookup
) -> None:
    mysql_server.sql("DROP TABLE IF EXISTS big; CREATE TABLE big (id INT PRIMARY KEY, v LONGTEXT)")
    mysql_server.execute(
        "INSERT INTO big VALUES (%s, %s)", [(i, str(i) * 50_000) for i in range(1, 41)], many=True
    )  # about 3 MB of values in one batch
    source = make_lookup(mysql_server.url, table="big", key="id", schema="v string")

    found = await source.lookup_many(list(range(1, 41)))

    assert all(found[i] == (str(i) * 50_000,) for i in range(1, 41))


@pytest.mark.asyncio
async def test_other_schemas_read_rows(mysql_server: MySqlServer, make_lookup: MakeLookup) -> None:
    mysql_server.sql(
        "DROP TABLE IF EXISTS dec_rows;"
        "CREATE TABLE dec_rows (id INT PRIMARY KEY, d DECIMAL(30,10));"
        "INSERT INTO dec_rows VALUES (1, 12345678901234567890.0123456789)"
    )
    source = make_lookup(mysql_server.url, table="dec_rows", key="id", schema="d decimal(30,10)")

    found = await source.lookup_many([1])

    plan = next(iter(pool.handle_for(source._settings).plans.values()))
    assert not plan.aggregated
    assert str(found[1][0]) == "12345678901234567890.0123456789"
