"""Lookups every relational connector answers alike, on each real server: hits, misses,
1:N, composite keys, NULLs, keys of the wrong type, batches, the query form, columns read
when no schema is given, the columnar answer, joins, pickling, settings checked."""

from __future__ import annotations

import pickle
from decimal import Decimal

import pyarrow as pa
import pytest

from connectors.mysql import MySqlLookup
from connectors.postgres import PostgresLookup
from connectors.sql import SqlLookup
from enrich import DecodeError, LookupFailed, lookup_rows
from tests.connectors.sql.conftest import MakeLookup, Store
from tests.support.sql_lookups import struct_rows

pytestmark = pytest.mark.timeout(60)
SCHEMA = "name string, tier string, credit double"
STRUCT_OF_SCHEMA = pa.struct(
    [("name", pa.string()), ("tier", pa.string()), ("credit", pa.float64())]
)


@pytest.mark.asyncio
async def test_one_statement_answers_hits_misses_and_null_fields(
    store: Store, make_lookup: MakeLookup
) -> None:
    users = make_lookup(store.url, table="users", key="id", schema=SCHEMA)

    found = await users.lookup_many([1, 2, 3, 99])

    assert found == {
        1: ("Ada", "gold", 12.5),
        2: ("Bob", "silver", None),
        3: (None, None, None),  # a row whose fields are all NULL is a hit, not a miss
        99: None,
    }


@pytest.mark.asyncio
async def test_several_rows_of_a_key_are_a_list(store: Store, make_lookup: MakeLookup) -> None:
    orders = make_lookup(store.url, table="orders", key="user_id", schema="total decimal(10,2)")

    found = await orders.lookup_many([1, 2, 3])

    assert sorted(found[1]) == [(Decimal("3.00"),), (Decimal("10.50"),)]
    assert found[2] == (Decimal("7.25"),)
    assert found[3] is None


@pytest.mark.asyncio
async def test_composite_keys_match_both_parts(store: Store, make_lookup: MakeLookup) -> None:
    accounts = make_lookup(store.url, table="accounts", key=["tenant", "id"], schema="name string")

    found = await accounts.lookup_many([("eu", 1), ("us", 1), ("us", 2), ("eu", 2)])

    assert found == {
        ("eu", 1): ("eu-one",),
        ("us", 1): ("us-one",),
        ("us", 2): None,
        ("eu", 2): ("eu-two",),
    }


@pytest.mark.asyncio
async def test_a_key_of_the_wrong_type_fails_alone_and_matches_nothing(
    store: Store, make_lookup: MakeLookup
) -> None:
    # MySQL compares 'two' with an integer column as 0: the key must never reach it.
    store.insert("users", [(0, "Zero", "none", 0)])
    users = make_lookup(store.url, table="users", key="id", schema=SCHEMA)

    found = await users.lookup_many([1, "two", b"3"])
    alone = await users.lookup_many(["two"])  # a call whose every key is refused

    assert found[1] == ("Ada", "gold", 12.5)
    for bad in ("two", b"3"):
        assert isinstance(found[bad], LookupFailed) and found[bad].kind == "key"
        assert not found[bad].retryable
    assert list(alone) == ["two"] and alone["two"].kind == "key"


@pytest.mark.asyncio
async def test_a_value_that_does_not_fit_fails_its_key_alone(
    store: Store, make_lookup: MakeLookup
) -> None:
    users = make_lookup(store.url, table="users", key="id", schema="name string, credit int")

    found = await users.lookup_many([1, 3])

    assert isinstance(found[1], DecodeError) and "'credit'" in str(found[1])  # 12.5 is no int
    assert found[3] == (None, None)


@pytest.mark.asyncio
async def test_batches_split_at_max_batch_and_answer_every_key(
    store: Store, make_lookup: MakeLookup
) -> None:
    store.insert("users", [(i, f"u{i}", "t", float(i)) for i in range(10, 2010)])
    users = make_lookup(store.url, table="users", key="id", schema=SCHEMA, max_batch=300)

    found = await users.lookup_many(list(range(10, 2010)))
    each = [part async for part in users.lookup_each(list(range(10, 2010)))]

    assert all(found[k] == (f"u{k}", "t", float(k)) for k in range(10, 2010))
    assert len(each) == 7  # ceil(2000 / 300) statements, each handed over on its own
    assert {k for part in each for k in part} == set(range(10, 2010))


@pytest.mark.asyncio
async def test_query_form_with_one_keys_parameter_and_a_literal_percent(
    store: Store, make_lookup: MakeLookup
) -> None:
    spent = make_lookup(
        store.url,
        query="SELECT user_id, SUM(total) AS spent FROM orders "
        f"WHERE item LIKE '%' AND user_id {store.in_keys} GROUP BY user_id",
        key="user_id",
        schema="spent decimal(10,2)",
    )

    assert await spent.lookup_many([1, 2, 5]) == {
        1: (Decimal("13.50"),),
        2: (Decimal("7.25"),),
        5: None,
    }


@pytest.mark.asyncio
async def test_schema_read_from_the_table(store: Store, make_lookup: MakeLookup) -> None:
    users = make_lookup(store.url, table="users", key="id")

    assert users.schema.ddl() == "`name` string, `tier` string, `credit` double"
    assert (await users.lookup_many([1]))[1] == ("Ada", "gold", 12.5)


def test_a_missing_table_or_key_column_is_named_on_construction(store: Store) -> None:
    with pytest.raises(ValueError, match="table 'nowhere' does not exist"):
        store.lookup(store.url, table="nowhere", key="id")
    with pytest.raises(ValueError, match="has no column 'uid'"):
        store.lookup(store.url, table="users", key="uid")


@pytest.mark.asyncio
async def test_columnar_answer_matches_lookup_many(store: Store, make_lookup: MakeLookup) -> None:
    users = make_lookup(store.url, table="users", key="id", schema=SCHEMA)

    answer = await users.lookup_arrow(pa.array([2, 99, 1]), STRUCT_OF_SCHEMA)

    assert struct_rows(answer.rows) == [("Bob", "silver", None), None, ("Ada", "gold", 12.5)]
    assert answer.is_simple()


def test_lookup_rows_left_inner_one_to_many_and_composite(store: Store) -> None:
    users = store.lookup(store.url, table="users", key="id", schema=SCHEMA)
    orders = store.lookup(store.url, table="orders", key="user_id", schema="item string")
    accounts = store.lookup(store.url, table="accounts", key=["tenant", "id"], schema="name string")
    rows = [{"user_id": 1}, {"user_id": 99}, {"user_id": None}, {"user_id": 2}]
    visits = [{"tenant": "eu", "user_id": 2}, {"tenant": None, "user_id": 1}]

    left = list(lookup_rows(rows, users, on="user_id", how="left"))
    inner = list(lookup_rows(rows, users, on="user_id", how="inner"))
    many = list(lookup_rows(rows, orders, on="user_id", how="inner"))
    both = list(lookup_rows(visits, accounts, on=["tenant", "user_id"], how="left"))

    assert [(r["user_id"], r["name"]) for r in left] == [
        (1, "Ada"),
        (99, None),
        (None, None),
        (2, "Bob"),
    ]
    assert [r["user_id"] for r in inner] == [1, 2]
    assert sorted((r["user_id"], r["item"]) for r in many) == [(1, "ink"), (1, "pen"), (2, "pad")]
    assert [r["name"] for r in both] == ["eu-two", None]


def test_description_pickles_compares_and_hides_the_password(store: Store) -> None:
    server = store.server
    users = store.lookup(store.url, table="users", key="id", schema=SCHEMA, pool_size=3)
    copy = pickle.loads(pickle.dumps(users))

    assert copy == users and hash(copy) == hash(users)
    assert server.password not in repr(users) + repr(copy) + str(users._settings)
    assert repr(users).startswith(f"{type(users).__name__}('{store.url_of(password='***')}'")


@pytest.mark.parametrize(
    ("lookup", "url", "bad_table"),
    [
        (PostgresLookup, "postgresql://u:pw@127.0.0.1:1/db", 'us"ers'),
        (MySqlLookup, "mysql://u:pw@127.0.0.1:1/db", "us`ers"),
    ],
    ids=["postgres", "mysql"],
)
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"table": "users", "key": 5}, "key must be a column name"),
        ({"table": "BAD", "key": "id"}, "table must be a name"),
        ({"key": "id"}, "either table="),
        ({"query": "SELECT 1", "key": "id", "schema": "a int"}, "exactly one :keys"),
        ({"table": "users", "key": "id", "schema": "a int", "pool_size": 0}, "pool_size"),
        ({"table": "users", "key": "id", "schema": "a int", "timeout": -1}, "timeout"),
        ({"table": "users", "key": "id", "schema": "a int", "concurrency": "x"}, "concurrency"),
    ],
)
def test_bad_settings_are_named(
    lookup: type[SqlLookup], url: str, bad_table: str, settings: dict[str, object], message: str
) -> None:
    if settings.get("table") == "BAD":
        settings = {**settings, "table": bad_table}
    with pytest.raises(ValueError, match=message):
        lookup(url, **settings)  # type: ignore[arg-type]
