"""PostgresLookup against a real server: hits, misses, 1:N, composite keys, NULLs, keys
of the wrong type, the query form, columns read when no schema is given, pickling."""

from __future__ import annotations

import pickle
from decimal import Decimal

import pyarrow as pa
import pytest

from connectors.postgres import PostgresLookup
from connectors.sql import UnmappableColumn
from enrich import DecodeError, LookupFailed, lookup_rows
from enrich.demo.postgres_server import PostgresServer
from tests.postgres.conftest import MakeLookup, struct_rows

pytestmark = pytest.mark.timeout(60)
SCHEMA = "name string, tier string, credit double"
STRUCT_OF_SCHEMA = pa.struct(
    [("name", pa.string()), ("tier", pa.string()), ("credit", pa.float64())]
)


@pytest.mark.asyncio
async def test_one_statement_answers_hits_misses_and_null_fields(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    users = make_lookup(tables.url, table="users", key="id", schema=SCHEMA)

    found = await users.lookup_many([1, 2, 3, 99])

    assert found == {
        1: ("Ada", "gold", 12.5),
        2: ("Bob", "silver", None),
        3: (None, None, None),  # a row whose fields are all NULL is a hit, not a miss
        99: None,
    }


@pytest.mark.asyncio
async def test_several_rows_of_a_key_are_a_list(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    orders = make_lookup(tables.url, table="orders", key="user_id", schema="total decimal(10,2)")

    found = await orders.lookup_many([1, 2, 3])

    assert sorted(found[1]) == [(Decimal("3.00"),), (Decimal("10.50"),)]
    assert found[2] == (Decimal("7.25"),)
    assert found[3] is None


@pytest.mark.asyncio
async def test_composite_keys_match_both_parts(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    accounts = make_lookup(tables.url, table="accounts", key=["tenant", "id"], schema="name string")

    found = await accounts.lookup_many([("eu", 1), ("us", 1), ("us", 2), ("eu", 2)])

    assert found == {
        ("eu", 1): ("eu-one",),
        ("us", 1): ("us-one",),
        ("us", 2): None,
        ("eu", 2): ("eu-two",),
    }


@pytest.mark.asyncio
async def test_a_key_of_the_wrong_type_fails_alone(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    users = make_lookup(tables.url, table="users", key="id", schema=SCHEMA)

    found = await users.lookup_many([1, "two", b"3"])

    assert found[1] == ("Ada", "gold", 12.5)
    for bad in ("two", b"3"):
        assert isinstance(found[bad], LookupFailed) and found[bad].kind == "key"
        assert not found[bad].retryable


@pytest.mark.asyncio
async def test_a_value_that_does_not_fit_fails_its_key_alone(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    users = make_lookup(tables.url, table="users", key="id", schema="name string, credit int")

    found = await users.lookup_many([1, 3])

    assert isinstance(found[1], DecodeError) and "'credit'" in str(found[1])  # 12.5 is no int
    assert found[3] == (None, None)


@pytest.mark.asyncio
async def test_batches_split_at_max_batch_and_answer_every_key(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    tables.sql("INSERT INTO users SELECT i, 'u' || i, 't', i FROM generate_series(10, 2009) i")
    users = make_lookup(tables.url, table="users", key="id", schema=SCHEMA, max_batch=300)

    found = await users.lookup_many(list(range(10, 2010)))
    each = [part async for part in users.lookup_each(list(range(10, 2010)))]

    assert all(found[k] == (f"u{k}", "t", float(k)) for k in range(10, 2010))
    assert len(each) == 7  # ceil(2000 / 300) statements, each handed over on its own
    assert {k for part in each for k in part} == set(range(10, 2010))


@pytest.mark.asyncio
async def test_query_form_with_one_keys_parameter(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    spent = make_lookup(
        tables.url,
        query="SELECT user_id, sum(total) AS spent FROM orders WHERE user_id = ANY(:keys) "
        "GROUP BY user_id",
        key="user_id",
        schema="spent decimal(10,2)",
    )

    assert await spent.lookup_many([1, 2, 5]) == {
        1: (Decimal("13.50"),),
        2: (Decimal("7.25"),),
        5: None,
    }


@pytest.mark.asyncio
async def test_schema_read_from_the_table(tables: PostgresServer, make_lookup: MakeLookup) -> None:
    users = make_lookup(tables.url, table="users", key="id")

    assert users.schema.ddl() == "`name` string, `tier` string, `credit` double"
    assert (await users.lookup_many([1]))[1] == ("Ada", "gold", 12.5)


def test_an_unmappable_column_is_named(tables: PostgresServer) -> None:
    tables.sql("DROP TABLE IF EXISTS docs; CREATE TABLE docs (id int, body tsvector)")

    with pytest.raises(UnmappableColumn, match="column 'body' of 'docs' has type 'tsvector'"):
        PostgresLookup(tables.url, table="docs", key="id")


def test_a_missing_table_or_key_column_is_named_on_construction(tables: PostgresServer) -> None:
    with pytest.raises(ValueError, match="table 'nowhere' does not exist"):
        PostgresLookup(tables.url, table="nowhere", key="id")
    with pytest.raises(ValueError, match="has no column 'uid'"):
        PostgresLookup(tables.url, table="users", key="uid")


@pytest.mark.asyncio
async def test_columnar_answer_matches_lookup_many(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    users = make_lookup(tables.url, table="users", key="id", schema=SCHEMA)

    answer = await users.lookup_arrow(pa.array([2, 99, 1]), STRUCT_OF_SCHEMA)

    assert struct_rows(answer.rows) == [("Bob", "silver", None), None, ("Ada", "gold", 12.5)]
    assert answer.is_simple()


def test_lookup_rows_left_inner_and_one_to_many(tables: PostgresServer) -> None:
    users = PostgresLookup(tables.url, table="users", key="id", schema=SCHEMA)
    orders = PostgresLookup(tables.url, table="orders", key="user_id", schema="item string")
    rows = [{"user_id": 1}, {"user_id": 99}, {"user_id": None}, {"user_id": 2}]

    left = list(lookup_rows(rows, users, on="user_id", how="left"))
    inner = list(lookup_rows(rows, users, on="user_id", how="inner"))
    many = list(lookup_rows(rows, orders, on="user_id", how="inner"))

    assert [(r["user_id"], r["name"]) for r in left] == [
        (1, "Ada"),
        (99, None),
        (None, None),
        (2, "Bob"),
    ]
    assert [r["user_id"] for r in inner] == [1, 2]
    assert sorted((r["user_id"], r["item"]) for r in many) == [(1, "ink"), (1, "pen"), (2, "pad")]


def test_description_pickles_compares_and_hides_the_password(tables: PostgresServer) -> None:
    users = PostgresLookup(tables.url, table="users", key="id", schema=SCHEMA, pool_size=3)
    copy = pickle.loads(pickle.dumps(users))

    assert copy == users and hash(copy) == hash(users)
    assert tables.password not in repr(users) + repr(copy) + str(users._settings)
    assert repr(users).startswith(
        f"PostgresLookup('postgresql://{tables.user}:***@127.0.0.1:{tables.port}/{tables.database}'"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"table": "users", "key": 5}, "key must be a column name"),
        ({"table": 'us"ers', "key": "id"}, "table must be a name"),
        ({"key": "id"}, "either table="),
        ({"query": "SELECT 1", "key": "id", "schema": "a int"}, "exactly one :keys"),
        ({"table": "users", "key": "id", "schema": "a int", "pool_size": 0}, "pool_size"),
        ({"table": "users", "key": "id", "schema": "a int", "timeout": -1}, "timeout"),
        ({"table": "users", "key": "id", "schema": "a int", "concurrency": "x"}, "concurrency"),
    ],
)
def test_bad_settings_are_named(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PostgresLookup("postgresql://u:pw@127.0.0.1:1/db", **settings)  # type: ignore[arg-type]


def nan_safe(value: object) -> object:
    return repr(value) if isinstance(value, tuple) else value


def as_mapping(answer: object, keys: list[object]) -> dict[object, object]:
    """A columnar answer read back as ``lookup_many``'s mapping (errors by their text)."""
    rows = struct_rows(answer.rows)  # type: ignore[attr-defined]
    out: dict[object, object] = {}
    for position, key in enumerate(keys):
        if position in answer.errors:  # type: ignore[attr-defined]
            out[key] = f"error: {answer.errors[position]}"  # type: ignore[attr-defined]
        elif position in answer.multi:  # type: ignore[attr-defined]
            out[key] = sorted(answer.multi[position])  # type: ignore[attr-defined]
        else:
            out[key] = nan_safe(rows[position])
    return out


def expected_of(found: dict[object, object]) -> dict[object, object]:
    return {
        key: f"error: {value}"
        if isinstance(value, Exception)
        else sorted(value)
        if isinstance(value, list)
        else nan_safe(value)
        for key, value in found.items()
    }


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("table", "key", "schema", "struct", "keys"),
    [
        # several batches (max_batch=2), misses, NULL fields, in the asked order; quotes,
        # commas, a newline, an empty string, NaN and infinities in the CSV answers
        ("users", "id", SCHEMA, STRUCT_OF_SCHEMA, [4, 99, 1, 3, 2, 98, 1000, 6, 5]),
        # a unique text key with quotes and commas, answered by CSV too
        (
            "accounts_by_name",
            "name",
            "tenant string, id bigint",
            pa.struct([("tenant", pa.string()), ("id", pa.int64())]),
            ['eu,"one"', "us-one", "nobody", ""],
        ),
        # 1:N keys: the per-row decoder, rows as a list
        (
            "orders",
            "user_id",
            "total decimal(10,2), item string",
            pa.struct([("total", pa.decimal128(10, 2)), ("item", pa.string())]),
            [2, 1, 7],
        ),
        # numeric read as double, and an int field: Arrow would not take them as they are
        ("orders", "user_id", "total double", pa.struct([("total", pa.float64())]), [1, 2]),
        ("users", "id", "credit int", pa.struct([("credit", pa.int32())]), [1, 3]),
        # keys an integer column refuses, among good ones
        ("users", "id", SCHEMA, STRUCT_OF_SCHEMA, ["a", 1, b"x", 2]),
    ],
)
async def test_columnar_answers_what_lookup_many_answers(
    tables: PostgresServer,
    make_lookup: MakeLookup,
    table: str,
    key: str,
    schema: str,
    struct: pa.StructType,
    keys: list[object],
) -> None:
    tables.sql(
        "DROP TABLE IF EXISTS accounts_by_name; CREATE TABLE accounts_by_name "
        "(name text PRIMARY KEY, tenant text, id bigint);"
        "INSERT INTO accounts_by_name VALUES "
        "('eu,\"one\"', 'eu', 1), ('us-one', NULL, 2), ('', 'x\"y', NULL)"
    )
    source = make_lookup(tables.url, table=table, key=key, schema=schema, max_batch=2)
    arrow_keys = pa.array(keys) if len({type(k) for k in keys}) == 1 else pa.array(map(str, keys))
    asked = arrow_keys.to_pylist()

    answer = await source.lookup_arrow(arrow_keys, struct)

    assert as_mapping(answer, asked) == expected_of(dict(await source.lookup_many(asked)))


@pytest.mark.asyncio
async def test_adaptive_concurrency_follows_the_statements(
    tables: PostgresServer, make_lookup: MakeLookup
) -> None:
    users = make_lookup(
        tables.url, table="users", key="id", schema=SCHEMA, concurrency="auto", max_batch=1
    )
    assert users.concurrency_statistics() is None  # no statement yet

    found = await users.lookup_many([1, 2, 3])

    assert found[1] == ("Ada", "gold", 12.5)
    statistics = users.concurrency_statistics()
    assert statistics is not None and 1 <= statistics.limit <= users._settings.pool_size
    assert "concurrency='auto'" in repr(users)


def test_job_rate_limit_needs_the_redis_of_its_bucket(tables: PostgresServer) -> None:
    from enrich.spi import JobRateLimit

    with pytest.raises(ValueError, match="needs the Redis of its shared bucket"):
        PostgresLookup(tables.url, table="users", key="id", schema=SCHEMA, job_rate_limit=100)
    limited = PostgresLookup(
        tables.url,
        table="users",
        key="id",
        schema=SCHEMA,
        job_rate_limit=JobRateLimit(rate=100, redis_url="redis://127.0.0.1:1/0"),
    )
    assert "job_rate_limit=" in repr(limited) and tables.password not in repr(limited)
