"""The columnar Redis lookup gives every key the outcome ``lookup_many`` gives it."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
import pytest

from connectors.redis.arrow import decode_json
from enrich.lookup.contract.columnar_answer import answer_from_mapping, struct_rows
from tests.connectors.redis.conftest import MakeLookup
from tests.support.answers import DOCUMENTS, SCHEMA, STRUCT, expected, outcomes

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]

# Values where Arrow's reader and the per-value decoder could disagree; each must end
# the same way on both paths.
TRICKY: dict[str, bytes] = {
    **DOCUMENTS,
    "nan": b'{"score": NaN}',
    "infinity": b'{"score": -Infinity}',
    "infinite": b'{"score": 1e400}',
    "array": b'[{"name": "one"}, {"name": "two"}]',
    "garbage": b"not json",
    "two_objects": b'{"name": "a"} {"name": "b"}',
    "pretty": b'{\n  "name": "p"\n}',
    "leading_space": b' {"name": "s"}',
    "bad_utf8": b'{"name": "\xff"}',
}


# A Redis to store values in, its URL, and whether it is a cluster.
Target = tuple[Any, str, bool]


@pytest.fixture(params=[False, True], ids=["standalone", "cluster"])
def target(request: pytest.FixtureRequest) -> Target:
    """Each test runs on a standalone server and on a cluster (fixtures made on demand)."""
    if request.param:
        cluster = request.getfixturevalue("redis_cluster")
        return request.getfixturevalue("cluster_client"), cluster.url, True
    server = request.getfixturevalue("redis_server")
    return request.getfixturevalue("redis_client"), server.url, False


async def test_every_value_ends_as_with_lookup_many(
    make_lookup: MakeLookup, target: Target
) -> None:
    store, url, cluster = target
    for name, value in TRICKY.items():
        store.set(f"t:{name}", value)
    store.set("t:wrong", "x")
    store.delete("t:wrong")
    store.rpush("t:wrong", "a list")  # MGET reads it as a miss
    source = make_lookup(url, key_template="t:{}", value="json", schema=SCHEMA, cluster=cluster)
    keys = [*TRICKY, "absent", "wrong"]
    answer = await source.lookup_arrow(pa.array(keys), STRUCT)
    assert len(answer) == len(keys)
    assert outcomes(keys, answer) == expected(keys, dict(await source.lookup_many(keys)))
    # Each tricky value alone in its request, too (bulk decode of one value).
    for key in keys:
        alone = await source.lookup_arrow(pa.array([key]), STRUCT)
        assert outcomes([key], alone) == expected([key], dict(await source.lookup_many([key])))


async def test_int_keys_are_rendered_like_the_template(
    make_lookup: MakeLookup, redis_client: Any, redis_server: Any
) -> None:
    for i in range(1200):
        redis_client.set(f"user:{i}:v", f'{{"name": "u{i}", "n": {i}}}')
    source = make_lookup(
        redis_server.url, key_template="user:{}:v", value="json", schema=SCHEMA, max_batch=500
    )
    keys = pa.array(list(range(1250)), pa.int64())
    answer = await source.lookup_arrow(keys, STRUCT)
    assert answer.is_simple()
    rows = struct_rows(answer.rows)
    assert rows[7] == ("u7", 7, None, None, None, None)
    assert rows[1199][:2] == ("u1199", 1199)
    assert rows[1200:] == [None] * 50  # misses


async def test_hash_values_take_the_per_key_decoder(
    make_lookup: MakeLookup, redis_client: Any, redis_server: Any
) -> None:
    redis_client.hset("h:1", mapping={"name": "Ada", "n": "5"})
    redis_client.hset("h:2", mapping={"n": "five"})
    source = make_lookup(redis_server.url, key_template="h:{}", value="hash", schema=SCHEMA)
    keys = ["1", "2", "3"]
    answer = await source.lookup_arrow(pa.array(keys), STRUCT)
    assert outcomes(keys, answer) == expected(keys, dict(await source.lookup_many(keys)))
    assert 1 in answer.errors and "field 'n'" in str(answer.errors[1])


async def test_bulk_decoding_matches_per_value_decoding_without_a_server() -> None:
    from connectors.redis import RedisLookup

    source = RedisLookup("redis://localhost:1/0", key_template="t:{}", value="json", schema=SCHEMA)
    values = [*TRICKY.values(), None]
    redis_keys = [f"t:{n}".encode() for n in [*TRICKY, "absent"]]
    answer = decode_json(values, redis_keys, source._settings, source.schema, STRUCT)
    bad = {i for i in answer.errors}
    names = list(TRICKY)
    assert {names[i] for i in bad} >= {
        "garbage",
        "nan",
        "infinity",
        "infinite",
        "bad_utf8",
        "fraction_as_int",
    }
    assert struct_rows(answer.rows)[names.index("float_as_int")] == (
        None,
        3,
        None,
        None,
        None,
        None,
    )


async def test_fetch_arrow_reads_now_and_decodes_later_on_any_thread(
    make_lookup: MakeLookup, redis_client: Any, redis_server: Any
) -> None:
    for name, value in TRICKY.items():
        redis_client.set(f"t:{name}", value)
    source = make_lookup(redis_server.url, key_template="t:{}", value="json", schema=SCHEMA)
    keys = [*TRICKY, "absent"]
    decode = await source.fetch_arrow(pa.array(keys), STRUCT)
    want = outcomes(keys, await source.lookup_arrow(pa.array(keys), STRUCT))
    redis_client.flushall()  # the decode step works from the replies it holds, no I/O
    answer = await asyncio.to_thread(decode)
    assert outcomes(keys, answer) == want
    assert want["plain"] == ("Ada", 1, 9007199254740993, 2.0, None, True)


async def test_a_missing_not_null_field_is_the_per_value_decoders_error() -> None:
    from connectors.redis import RedisLookup

    source = RedisLookup(
        "redis://localhost:1/0", key_template="t:{}", value="json", schema="name string NOT NULL"
    )
    struct = pa.struct([("name", pa.string())])
    values = [b'{"name": "Ada"}', b'{"n": 1}', b'{"name": null}', None]
    redis_keys = [b"t:a", b"t:b", b"t:c", b"t:d"]
    answer = decode_json(values, redis_keys, source._settings, source.schema, struct)
    assert struct_rows(answer.rows) == [("Ada",), None, None, None]
    assert sorted(answer.errors) == [1, 2]
    assert str(answer.errors[1]) == (
        "redis key b't:b': field 'name': missing or null, but declared string NOT NULL"
    )


async def test_a_calls_mgets_go_out_as_one_pipeline_on_one_connection(
    make_lookup: MakeLookup, redis_client: Any, redis_server: Any
) -> None:
    for i in range(1000):
        redis_client.set(f"user:{i}", f'{{"name": "u{i}", "n": {i}}}')
    source = make_lookup(
        redis_server.url, key_template="user:{}", value="json", schema=SCHEMA, max_batch=100
    )
    await source.lookup_arrow(pa.array([0], pa.int64()), STRUCT)  # opens the pool
    redis_client.config_resetstat()
    connections = redis_client.info("stats")["total_connections_received"]
    keys = pa.array(list(range(1050)), pa.int64())

    answer = await source.lookup_arrow(keys, STRUCT)

    assert struct_rows(answer.rows)[999][:2] == ("u999", 999)
    assert struct_rows(answer.rows)[1000:] == [None] * 50
    # Eleven MGETs of at most max_batch keys, sent back to back on the open connection.
    assert redis_client.info("commandstats")["cmdstat_mget"]["calls"] == 11
    assert redis_client.info("stats")["total_connections_received"] == connections


async def test_a_value_over_max_value_bytes_fails_its_key_as_with_lookup_many(
    make_lookup: MakeLookup, target: Target
) -> None:
    store, url, cluster = target
    store.set("b:big", b'{"name": "' + b"x" * 100 + b'"}')
    store.set("b:small", b'{"name": "y"}')
    source = make_lookup(
        url,
        key_template="b:{}",
        value="json",
        schema=SCHEMA,
        cluster=cluster,
        max_value_bytes=50,
    )
    keys = ["big", "small", "absent"]
    answer = await source.lookup_arrow(pa.array(keys), STRUCT)
    assert outcomes(keys, answer) == expected(keys, dict(await source.lookup_many(keys)))
    error = answer.errors[0]
    assert (error.kind, error.key) == ("too_large", "big")  # type: ignore[attr-defined]
    assert struct_rows(answer.rows)[1] == ("y", None, None, None, None, None)


async def test_a_number_beyond_a_double_and_minus_zero_end_as_with_lookup_many(
    make_lookup: MakeLookup, redis_client: Any, redis_server: Any
) -> None:
    # Arrow's reader reads 1.8e308 as infinity (the per-value parser refuses it) and -0
    # as -0.0 (the per-value parser reads the integer 0: 0.0); repr tells -0.0 from 0.0.
    values = {
        "over": b'{"score": 1.8e308}',
        "over_ratio": b'{"ratio": -2e308, "name": "r"}',
        "minus_zero": b'{"score": -0, "name": "z"}',
        "minus_zero_ratio": b'{"ratio": -0}',
        "minus_zero_float": b'{"score": -0.0}',
        "plain": b'{"score": 1.5, "ratio": 0.5}',
    }
    source = stored(make_lookup, redis_client, redis_server.url, "f", values)
    await ends_as_with_lookup_many(source, list(values))


async def test_a_float_field_rounds_as_the_per_row_join_rounds(
    make_lookup: MakeLookup, redis_client: Any, redis_server: Any
) -> None:
    # The per-row join reads a double and converts it to float32, rounding twice; read
    # straight into float32, 1.0000000596046448 (a double halfway between two float32s,
    # as written) would round up instead of to even.
    texts = ["1.0000000596046448", "0.1", "3.4028235677973366e38", "16777217"]
    for n, text in enumerate(texts):
        redis_client.set(f"r:{n}", f'{{"ratio": {text}}}')
    source = make_lookup(redis_server.url, key_template="r:{}", value="json", schema=SCHEMA)
    keys = [str(n) for n in range(len(texts))]
    answer = await source.lookup_arrow(pa.array(keys), STRUCT)
    per_row = answer_from_mapping(keys, await source.lookup_many(keys), STRUCT)
    assert answer.rows.field("ratio").to_pylist() == per_row.rows.field("ratio").to_pylist()
    assert answer.rows.field("ratio")[0].as_py() == 1.0


async def test_invalid_utf8_outside_the_fields_is_the_per_value_decoders_error(
    make_lookup: MakeLookup, redis_client: Any, redis_server: Any
) -> None:
    # Arrow's reader checks UTF-8 only in the fields it keeps; the per-value parser
    # refuses the whole value.
    values = {
        "value": b'{"other": "caf\xe9", "name": "k"}',
        "name": b'{"caf\xe9": 1, "name": "k"}',
        "good": '{"other": "café", "name": "k"}'.encode(),
    }
    source = stored(make_lookup, redis_client, redis_server.url, "u", values)
    keys = list(values)
    await ends_as_with_lookup_many(source, keys)
    answer = await source.lookup_arrow(pa.array(keys), STRUCT)
    assert sorted(answer.errors) == [0, 1]
    assert "not valid JSON" in str(answer.errors[0])


async def ends_as_with_lookup_many(source: Any, keys: list[str]) -> None:
    """Each key's outcome on the columnar path is its outcome with ``lookup_many``, asked
    all together and one by one (repr tells -0.0 from 0.0)."""
    for asked in [keys, *([key] for key in keys)]:
        answer = await source.lookup_arrow(pa.array(asked), STRUCT)
        want = expected(asked, dict(await source.lookup_many(asked)))
        assert repr(outcomes(asked, answer)) == repr(want)


def stored(
    make_lookup: MakeLookup, client: Any, url: str, prefix: str, values: dict[str, bytes]
) -> Any:
    """``values`` stored under ``prefix:<name>``, and a JSON source of them."""
    for name, value in values.items():
        client.set(f"{prefix}:{name}", value)
    return make_lookup(url, key_template=prefix + ":{}", value="json", schema=SCHEMA)
