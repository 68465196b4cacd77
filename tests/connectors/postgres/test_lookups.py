"""PostgresLookup against a real server, where PostgreSQL has its own ways: a column type
no field maps to, the columnar lookup's own statements (column arrays, CSV), adaptive
concurrency, the job rate limit. What every relational connector answers alike is
``tests/connectors/sql/test_lookups.py``'s, run on this server too."""

from __future__ import annotations

import pyarrow as pa
import pytest

from connectors.postgres import PostgresLookup
from connectors.sql import UnmappableColumn
from enrich.demo.postgres_server import PostgresServer
from tests.connectors.postgres.conftest import MakeLookup
from tests.support.sql_lookups import struct_rows

pytestmark = pytest.mark.timeout(60)
SCHEMA = "name string, tier string, credit double"
STRUCT_OF_SCHEMA = pa.struct(
    [("name", pa.string()), ("tier", pa.string()), ("credit", pa.float64())]
)


def test_an_unmappable_column_is_named(tables: PostgresServer) -> None:
    tables.sql("DROP TABLE IF EXISTS docs; CREATE TABLE docs (id int, body tsvector)")

    with pytest.raises(UnmappableColumn, match="column 'body' of 'docs' has type 'tsvector'"):
        PostgresLookup(tables.url, table="docs", key="id")


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
