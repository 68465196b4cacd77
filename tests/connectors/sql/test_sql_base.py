"""The database-neutral base of the relational connectors (connectors.sql), without a
server: URLs and their masking, targets and statements, column types, rows to answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from connectors.sql import (
    Column,
    DatabaseUrl,
    RowReader,
    Target,
    UnmappableColumn,
    batch_statement,
    dimension_pages,
    fit_key,
    full_statement,
    schema_from_columns,
    store_key,
)
from enrich import DecodeError, SchemaError
from enrich.spi import Schema
from tests.support.sql_lookups import collect_driver_sockets


def parse(url: str, **kw: Any) -> DatabaseUrl:
    return DatabaseUrl.parse(url, schemes=("postgresql", "postgres"), default_port=5432, **kw)


def test_url_parts_and_masking() -> None:
    url = parse("postgresql://ann:p%40ss%2Fw@DB.example:6543/shop?sslmode=require&password=q")

    assert (url.host, url.port, url.database, url.username) == ("db.example", 6543, "shop", "ann")
    assert url.password == "p@ss/w"  # the userinfo's wins over ?password=
    assert url.params == (("sslmode", "require"),)
    assert url.masked() == "postgresql://ann:***@db.example:6543/shop?sslmode=require"
    assert "p@ss" not in repr(url) and set(url.secrets) == {"p@ss/w", "p%40ss%2Fw"}


def test_url_password_keyword_wins_and_defaults_apply() -> None:
    url = parse("postgres://ann:old@h/db", password="new")

    assert url.password == "new" and url.port == 5432 and url.address == "h:5432"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://h/db", "must start with one of"),
        ("postgresql:///db", "must name one host"),
        ("postgresql://h1,h2/db", "must name one host"),
        ("postgresql://u:s3cret@h/a/b", "one database name"),
    ],
)
def test_bad_urls_are_named_without_the_password(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse(url)
    assert "s3cret" not in str(caught.value)


class Quoted:
    """A dialect spelling names in double quotes, strings as text, ANY($1) for a key."""

    def quote(self, name: str) -> str:
        return f'"{name}"'

    def field_expression(self, column: str, field_type: Any) -> str:
        return f"{column}::text" if str(field_type) == "string" else column

    def key_filter(self, key_columns: Any, keys_sql: Any) -> str:
        return f"({', '.join(key_columns)}) IN (:batch)"

    def keys_parameter(self) -> str:
        return "$1"


SCHEMA = Schema.of("name string, credit double")


def test_table_form_statements() -> None:
    target = Target.of(table="app.users", key=["tenant", "id"])

    assert batch_statement(target, SCHEMA, Quoted()) == (
        'SELECT "tenant", "id", "name"::text AS "name", "credit" FROM "app"."users" '
        'WHERE ("tenant", "id") IN (:batch)'
    )
    assert full_statement(target, SCHEMA, Quoted()).endswith(' ORDER BY "tenant", "id"')
    assert "ORDER BY" not in full_statement(target, SCHEMA, Quoted(), ordered=False)
    assert target.described() == "table='app.users', key=['tenant', 'id']"


def test_query_form_wraps_the_query_and_replaces_only_the_parameter() -> None:
    query = "SELECT id, name, credit FROM u WHERE id = ANY(:keys) AND kind::keys IS NOT NULL"
    target = Target.of(table=None, key="id", query=query, full_query="SELECT * FROM u")

    assert batch_statement(target, SCHEMA, Quoted()) == (
        'SELECT "id", "name", "credit" FROM (SELECT id, name, credit FROM u WHERE '
        "id = ANY($1) AND kind::keys IS NOT NULL) AS q"
    )
    assert full_statement(target, SCHEMA, Quoted()) == (
        'SELECT "id", "name", "credit" FROM (SELECT * FROM u) AS q ORDER BY "id"'
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"table": "a.b.c", "key": "id"}, "'table' or 'schema.table'"),
        ({"table": "t", "key": ["id", "ID"]}, "names a column twice"),
        ({"table": "t", "key": []}, "key must be a column name"),
        ({"table": None, "key": "id", "query": "SELECT :keys, :keys"}, "exactly one"),
        ({"table": None, "key": ["a", "b"], "query": "SELECT 1 WHERE a = :keys"}, "composite"),
        ({"table": "t", "key": "id", "full_query": "SELECT 1"}, "full_query is for"),
    ],
)
def test_bad_targets_are_named(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Target.of(**settings)


def test_columns_map_to_a_schema_and_name_what_does_not() -> None:
    columns = [
        Column("id", "integer"),
        Column("price", "numeric", 12, 2),
        Column("big", "numeric"),
        Column("tags", "ARRAY", detail="_text"),
        Column("seen", "timestamp with time zone"),
        Column("raw", "bytea"),
    ]

    schema = schema_from_columns(columns, table="t", keys=["id"])

    assert schema.ddl().replace("`", "") == (
        "price decimal(12,2), big decimal(38,18), tags array<string>, seen timestamp, raw binary"
    )
    with pytest.raises(UnmappableColumn, match="column 'geo' of t has type 'point'") as caught:
        schema_from_columns([Column("id", "int"), Column("geo", "point")], table="t", keys=["id"])
    assert isinstance(caught.value, SchemaError) and caught.value.column == "geo"
    with pytest.raises(ValueError, match="has no column 'uid'"):
        schema_from_columns(columns, table="t", keys=["uid"])


def test_rows_become_answers_with_one_to_many_misses_and_a_bad_row() -> None:
    reader = RowReader(SCHEMA, 1, "table 't'")
    rows = [(1, "a", 1.0), (2, "b", "x"), (2, "c", 3.0), (3, "d", 2), (3, "e", 4)]

    found = reader.answers([1, 2, 3, 4], rows)

    assert found[1] == ("a", 1.0) and found[4] is None
    assert isinstance(found[2], DecodeError) and "'credit'" in str(found[2])
    assert found[3] == [("d", 2.0), ("e", 4.0)]


def test_keys_match_by_value_and_are_checked_against_their_columns() -> None:
    import uuid

    reader = RowReader(Schema.of("n int"), 2, "t")
    tag = uuid.UUID(int=5)

    assert reader.answers([("eu", str(tag))], [("eu", tag, 7)]) == {("eu", str(tag)): (7,)}
    assert store_key(("a", bytearray(b"x"))) == ("a", b"x")
    assert fit_key(("eu", 1), ("text", "int")) == ("eu", 1)
    for bad in [("eu", "1"), (1, 1), ("eu",), "eu"]:
        with pytest.raises(TypeError):
            fit_key(bad, ("text", "int"))


@pytest.mark.asyncio
async def test_full_pages_never_split_a_key() -> None:
    reader = RowReader(Schema.of("v int"), 1, "t")
    rows = [(1, 1), (2, 1), (2, 2), (2, 3), (3, 1), (4, 1), (4, 2)]

    async def pages() -> Any:
        for start in range(0, len(rows), 2):
            yield rows[start : start + 2]

    got = [page async for page, _ in dimension_pages(reader, pages(), 2)]

    keys = [key for page in got for key in page]
    assert sorted(keys) == [1, 2, 3, 4] and len(got) > 1  # each key in one page only
    merged = {key: answer for page in got for key, answer in page.items()}
    assert merged == {1: (1,), 2: [(1,), (2,), (3,)], 3: (1,), 4: [(1,), (2,)]}


@pytest.fixture(autouse=True)
def _driver_sockets() -> Iterator[None]:
    """After every test here, what its database driver left open is collected."""
    yield
    collect_driver_sockets()
