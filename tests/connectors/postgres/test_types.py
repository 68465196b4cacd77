"""Every type of the dimension schema read from PostgreSQL columns, NULLs included, by
lookup_many and by the columnar lookup alike."""

from __future__ import annotations

from decimal import Decimal

import pytest

from enrich.demo.postgres_server import PostgresServer
from tests.connectors.postgres.conftest import MakeLookup
from tests.support.sql_lookups import EVERY_TYPE_ARROW, EVERY_TYPE_SCALARS, struct_rows

pytestmark = pytest.mark.timeout(60)

TABLE = """
DROP TABLE IF EXISTS everything; DROP TYPE IF EXISTS place;
CREATE TYPE place AS (city text, zip integer);
CREATE TABLE everything (
  id integer PRIMARY KEY, s text, u uuid, ti smallint, si smallint, i integer, bi bigint,
  f real, d double precision, dec numeric(12,3), b boolean, bin bytea, dt date,
  ts timestamptz, ntz timestamp, arr integer[], tags text[], m jsonb, st place, doc jsonb
);
INSERT INTO everything VALUES (
  1, 'héllo', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', -7, 300, -70000, 9007199254740993,
  1.5, 2.25, 123456789.125, true, '\\x00ff10', '2024-05-01',
  '2024-05-01 12:30:45.123456+02', '2024-05-01 12:30:45.5', '{1,NULL,3}', '{a,b}',
  '{"k": 1.5, "n": null}', ROW('Paris', 75001), '{"city": "Oslo", "zip": 150}'
);
INSERT INTO everything (id) VALUES (2);
"""
SCHEMA = (
    "s string, u string, ti tinyint, si smallint, i int, bi bigint, f float, d double, "
    "dec decimal(12,3), b boolean, bin binary, dt date, ts timestamp, ntz timestamp_ntz, "
    "arr array<int>, tags array<string>, m map<string,double>, st struct<city: string, zip: int>, "
    "doc struct<city: string, zip: int>"
)
EXPECTED = (
    *EVERY_TYPE_SCALARS,
    [1, None, 3],
    ["a", "b"],
    {"k": 1.5, "n": None},
    {"city": "Paris", "zip": 75001},
    {"city": "Oslo", "zip": 150},
)


@pytest.mark.asyncio
async def test_every_type_round_trips(
    postgres_server: PostgresServer, make_lookup: MakeLookup
) -> None:
    postgres_server.sql(TABLE)
    source = make_lookup(postgres_server.url, table="everything", key="id", schema=SCHEMA)

    found = await source.lookup_many([1, 2])

    assert found[1] == EXPECTED
    assert found[2] == (None,) * len(EXPECTED)


@pytest.mark.asyncio
async def test_every_type_round_trips_as_arrow(
    postgres_server: PostgresServer, make_lookup: MakeLookup
) -> None:
    import pyarrow as pa

    postgres_server.sql(TABLE)
    source = make_lookup(postgres_server.url, table="everything", key="id", schema=SCHEMA)
    place = pa.struct([("city", pa.string()), ("zip", pa.int32())])
    struct = pa.struct([*EVERY_TYPE_ARROW, ("doc", place)])

    answer = await source.lookup_arrow(pa.array([2, 1, 3], pa.int64()), struct)

    rows = struct_rows(answer.rows)
    assert rows[0] == (None,) * len(EXPECTED) and rows[2] is None
    got = dict(zip(source.schema.names, rows[1], strict=True))
    assert got["m"] == [("k", 1.5), ("n", None)]  # Arrow's map: (key, value) pairs
    assert got["dec"] == Decimal("123456789.125") and got["bin"] == b"\x00\xff\x10"
    assert got["ts"] == EXPECTED[12]


@pytest.mark.asyncio
async def test_types_mapped_from_the_columns(
    postgres_server: PostgresServer, make_lookup: MakeLookup
) -> None:
    postgres_server.sql(TABLE)
    source = make_lookup(postgres_server.url, table="everything", key="id")

    assert source.schema.ddl().replace("`", "") == (
        "s string, u string, ti smallint, si smallint, i int, bi bigint, f float, d double, "
        "dec decimal(12,3), b boolean, bin binary, dt date, ts timestamp, ntz timestamp_ntz, "
        "arr array<int>, tags array<string>, m string, st string, doc string"
    )
    row = (await source.lookup_many([1]))[1]
    assert row[:3] == ("héllo", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", -7)
    assert row[-3] == '{"k": 1.5, "n": null}'  # jsonb as its text
