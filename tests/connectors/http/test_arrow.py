"""The columnar lookup of a batch-mode HttpLookup gives every key the outcome
``lookup_many`` gives it, with the same requests."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import pyarrow as pa
import pytest

from connectors.http import HttpLookup
from enrich import DecodeError, LookupFailed
from enrich.lookup.contract.columnar_answer import ColumnarSource, struct_rows
from enrich.lookup.join_settings import JoinSettings
from enrich.lookup.lane.run import ColumnarLane
from enrich.spark.join.join_batches import JoinPlan
from tests.connectors.http.conftest import MakeSource
from tests.support.answers import DOCUMENTS, SCHEMA, STRUCT, expected, outcomes
from tests.support.http_server import BATCH_PATH, HttpTestServer

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]

# Documents as the service writes them, where a bulk decoder and the per-value decoder
# could disagree; each must end the same way on both paths. All of them in one answer
# object still make valid JSON.
TRICKY: dict[str, bytes] = {
    **DOCUMENTS,
    "tiny_as_int": b'{"n": 1e-320}',
    "bool_as_score": b'{"score": true}',
    "big_as_score": b'{"score": 9007199254740993}',
    "text_as_score": b'{"score": "2.5"}',
    "array": b'[{"name": "one"}, {"name": "two", "n": 2}]',
    "bad_in_array": b'[{"name": "one"}, {"n": "two"}]',
    "number": b"42",
    "text": b'"Ada"',
    "pretty": b'{\n  "name": "p",\n  "n": 7\n}',
}
# Documents that make the whole answer unreadable: alone in their POST, they fail it.
BREAKING: dict[str, bytes] = {
    "nan": b'{"score": NaN}',
    "infinite": b'{"score": 1e400}',
    "huge": b'{"big": 18446744073709551616}',
    "garbage": b"not json",
    "bad_utf8": b'{"name": "\xff"}',
}


async def both(source: HttpLookup, keys: list[Any]) -> tuple[Any, Any]:
    """The columnar outcomes and ``lookup_many``'s for ``keys`` (or what each raised)."""
    try:
        answer = await source.lookup_arrow(pa.array(keys), STRUCT)
        assert len(answer) == len(keys)
        got: Any = outcomes(keys, answer)
    except (LookupFailed, DecodeError) as exc:
        got = ("raised", type(exc).__name__, str(exc))
    try:
        want: Any = expected(keys, dict(await source.lookup_many(keys)))
    except (LookupFailed, DecodeError) as exc:
        want = ("raised", type(exc).__name__, str(exc))
    return got, want


async def test_every_document_ends_as_with_lookup_many(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.raw.update(TRICKY)
    http_server.raw.update(BREAKING)
    source = make_source(batch_url=http_server.url(BATCH_PATH), schema=SCHEMA, max_batch=1000)
    keys = [*TRICKY, "absent"]
    got, want = await both(source, keys)
    assert got == want
    assert want["plain"] == ("Ada", 1, 9007199254740993, 2.0, None, True)
    assert want["float_as_int"][1] == 3 and want["fraction_as_int"][0] == "error"
    assert want["array"][0] == "rows" and want["absent"] is None
    # Each document alone in its request, the breaking ones too.
    for key in [*keys, *BREAKING]:
        got, want = await both(source, [key])
        assert got == want, key
    assert (await both(source, ["nan"]))[0][:2] == ("raised", "DecodeError")


async def test_the_same_requests_go_out_int_keys_answered_by_their_text(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    for i in range(0, 250, 2):
        http_server.data[str(i)] = {"name": f"u{i}", "n": i}
    source = make_source(batch_url=http_server.url(BATCH_PATH), schema=SCHEMA, max_batch=100)
    keys = pa.array(range(250), pa.int64())
    answer = await source.lookup_arrow(keys, STRUCT)
    columnar = sorted(r.body for r in http_server.requests)
    http_server.reset()
    for i in range(0, 250, 2):
        http_server.data[str(i)] = {"name": f"u{i}", "n": i}
    found = await source.lookup_many(keys.to_pylist())
    assert columnar == sorted(r.body for r in http_server.requests)
    assert [len(json.loads(body)) for body in columnar] == [100, 100, 50]
    assert answer.is_simple()
    rows = struct_rows(answer.rows)
    assert rows[4] == ("u4", 4, None, None, None, None) and rows[5] is None
    assert outcomes(keys.to_pylist(), answer) == expected(keys.to_pylist(), found)


async def test_a_failed_chunk_fails_its_keys_and_all_failed_raise_as_lookup_many(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    for key in "abcd":
        http_server.data[key] = {"name": key}
    http_server.malformed.add("b")  # its POST's answer is not JSON
    source = make_source(batch_url=http_server.url(BATCH_PATH), schema=SCHEMA, max_batch=2)
    got, want = await both(source, list("abcd"))
    assert got == want
    assert got["a"] == got["b"] and got["a"][:2] == ("error", "DecodeError")
    assert got["c"][0] == "c"

    http_server.fail_batch(503, retry_after="7")
    with pytest.raises(LookupFailed) as columnar:
        await source.fetch_arrow(pa.array(list("abcd")), STRUCT)  # before any decoding
    with pytest.raises(LookupFailed) as per_key:
        await source.lookup_many(list("abcd"))
    assert str(columnar.value) == str(per_key.value)
    assert columnar.value.retry_after == per_key.value.retry_after == 7.0

    http_server.reset()
    http_server.answer_batch_with(b"[1, 2]")  # every answer readable, none an object
    decode = await source.fetch_arrow(pa.array(list("abcd")), STRUCT)
    with pytest.raises(DecodeError) as late:
        decode()
    with pytest.raises(DecodeError) as direct:
        await source.lookup_many(list("abcd"))
    assert str(late.value) == str(direct.value)


async def test_path_fields_and_not_null_read_as_with_lookup_many(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["1"] = {"user": {"name": "Ada", "n": 36, "x": {"age": 36}}}
    http_server.data["2"] = {"user": [{"name": "B1"}, {"name": "B2"}]}
    http_server.data["3"] = {"user": {"name": "C", "x": {"age": "old"}}}
    http_server.data["4"] = {"user": "not an object"}
    http_server.data["5"] = {"user": {"n": 5}}  # no name: refused where it is NOT NULL
    http_server.data["6"] = {"user": None}
    keys = [1, 2, 3, 4, 5, 6, 7]
    batch_url = http_server.url(BATCH_PATH)
    picked = make_source(batch_url=batch_url, schema=SCHEMA, path="user")
    nested = make_source(batch_url=batch_url, schema=SCHEMA, path="user", fields={"n": "x.age"})
    strict = make_source(
        batch_url=batch_url,
        path="user",
        schema=SCHEMA.replace("name string", "name string NOT NULL"),
    )
    for source in (picked, nested, strict):
        got, want = await both(source, keys)
        assert got == want
    assert (await both(nested, [1]))[0][1][:2] == ("Ada", 36)
    assert "NOT NULL" in (await both(strict, [5]))[0][5][2]


async def test_fetch_arrow_posts_now_and_decodes_later_on_any_thread(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.raw.update(TRICKY)
    source = make_source(batch_url=http_server.url(BATCH_PATH), schema=SCHEMA)
    keys = [*TRICKY, "absent"]
    decode = await source.fetch_arrow(pa.array(keys), STRUCT)
    want = outcomes(keys, await source.lookup_arrow(pa.array(keys), STRUCT))
    sent = len(http_server.requests)
    http_server.reset()  # the decode step works from the bodies it holds, no I/O
    answer = await asyncio.to_thread(decode)
    assert outcomes(keys, answer) == want
    assert sent == 2 and http_server.requests == []


async def test_only_a_batch_source_is_columnar(http_server: HttpTestServer) -> None:
    per_key = HttpLookup(http_server.url("/users/{}"), schema=SCHEMA)
    batch = HttpLookup(
        http_server.url("/users/{}"), schema=SCHEMA, batch_url=http_server.url(BATCH_PATH)
    )
    keys = pa.array(["a"])
    for source, columnar in ((per_key, False), (batch, True)):
        for copy in (source, pickle.loads(pickle.dumps(source))):
            assert isinstance(copy, ColumnarSource) is columnar
            assert hasattr(copy, "fetch_arrow") is columnar
            plan = JoinPlan(
                name="t", source=copy, on=(0,), columns=copy.schema.names, settings=JoinSettings()
            )
            assert isinstance(plan.engine([keys]), ColumnarLane) is columnar
        assert "lookup_arrow" not in repr(source)
