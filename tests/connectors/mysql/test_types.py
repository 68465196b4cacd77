"""Every type of the dimension schema read from MariaDB columns, NULLs included, by
lookup_many and by the columnar lookup alike; and the types mapped when no schema is given."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.connectors.mysql.conftest import MakeLookup
from tests.support.mysql_server import MySqlServer
from tests.support.sql_lookups import EVERY_TYPE_ARROW, EVERY_TYPE_SCALARS, struct_rows

pytestmark = pytest.mark.timeout(60)

TABLE = """
DROP TABLE IF EXISTS everything;
CREATE TABLE everything (
  id INT PRIMARY KEY, s VARCHAR(20), u CHAR(36), ti TINYINT, si SMALLINT, i INT, bi BIGINT,
  f FLOAT, d DOUBLE, `dec` DECIMAL(12,3), b BOOLEAN, bin VARBINARY(8), dt DATE,
  ts TIMESTAMP(6) NULL, ntz DATETIME(6), arr JSON, tags JSON, m JSON, st JSON, n INT
);
SET time_zone = '+02:00';
INSERT INTO everything VALUES (
  1, 'héllo', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', -7, 300, -70000, 9007199254740993,
  1.5, 2.25, 123456789.125, TRUE, X'00ff10', '2024-05-01',
  '2024-05-01 12:30:45.123456', '2024-05-01 12:30:45.5', '[1, null, 3]', '["a", "b"]',
  '{"k": 1.5, "n": null}', '{"city": "Paris", "zip": 75001}', 42
);
INSERT INTO everything (id) VALUES (2);
"""
SCHEMA = (
    "s string, u string, ti tinyint, si smallint, i int, bi bigint, f float, d double, "
    "dec decimal(12,3), b boolean, bin binary, dt date, ts timestamp, ntz timestamp_ntz, "
    "arr array<int>, tags array<string>, m map<string,double>, "
    "st struct<city: string, zip: int>, n string"
)
EXPECTED = (
    *EVERY_TYPE_SCALARS,
    [1, None, 3],
    ["a", "b"],
    {"k": 1.5, "n": None},
    {"city": "Paris", "zip": 75001},
    "42",  # a number read as a string field: the text the server prints
)


@pytest.mark.asyncio
async def test_every_type_round_trips(mysql_server: MySqlServer, make_lookup: MakeLookup) -> None:
    mysql_server.sql(TABLE)
    source = make_lookup(mysql_server.url, table="everything", key="id", schema=SCHEMA)

    found = await source.lookup_many([1, 2, 3])

    assert found[1] == EXPECTED
    assert found[2] == (None,) * len(EXPECTED)
    assert found[3] is None


@pytest.mark.asyncio
async def test_every_type_round_trips_as_arrow(
    mysql_server: MySqlServer, make_lookup: MakeLookup
) -> None:
    mysql_server.sql(TABLE)
    source = make_lookup(mysql_server.url, table="everything", key="id", schema=SCHEMA)
    struct = pa.struct([*EVERY_TYPE_ARROW, ("n", pa.string())])

    answer = await source.lookup_arrow(pa.array([1, 2, 3]), struct)
    rows = struct_rows(answer.rows)

    as_map = dict(rows[0][16])  # Arrow gives a map as its (key, value) pairs
    assert rows[0][:16] == EXPECTED[:16] and rows[0][17:] == EXPECTED[17:]
    assert as_map == EXPECTED[16]
    assert rows[1] == (None,) * len(EXPECTED) and rows[2] is None


@pytest.mark.asyncio
async def test_types_mapped_when_no_schema_is_given(
    mysql_server: MySqlServer, make_lookup: MakeLookup
) -> None:
    mysql_server.sql(TABLE)
    source = make_lookup(mysql_server.url, table="everything", key="id")

    assert source.schema.ddl() == (
        "`s` string, `u` string, `ti` tinyint, `si` smallint, `i` int, `bi` bigint, "
        "`f` float, `d` double, `dec` decimal(12,3), `b` boolean, `bin` binary, `dt` date, "
        "`ts` timestamp, `ntz` timestamp_ntz, `arr` string, `tags` string, `m` string, "
        "`st` string, `n` int"
    )
    found = (await source.lookup_many([1]))[1]
    assert found[:14] == EXPECTED[:14]
    assert found[14] == "[1, null, 3]"
