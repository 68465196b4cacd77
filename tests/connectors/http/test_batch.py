"""Batch mode: keys POSTed as JSON arrays, chunked by max_batch, answered by str(key)."""

from __future__ import annotations

import json

import pytest

from enrich import DecodeError, LookupFailed
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import BATCH_PATH, HttpTestServer


@pytest.mark.asyncio
async def test_keys_are_posted_in_chunks_of_max_batch(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    keys = [f"u{i}" for i in range(7)]
    for key in keys[:5]:
        http_server.data[key] = {"name": key}
    http_server.data["u5"] = None
    source = make_source(batch_url=http_server.url(BATCH_PATH), max_batch=3)

    result = await source.lookup_many(keys)

    expected = {key: (key, None) for key in keys[:5]}
    assert result == {**expected, "u5": None, "u6": None}
    received = http_server.requests
    assert [r.method for r in received] == ["POST"] * 3
    assert all(r.raw_path == BATCH_PATH for r in received)
    assert all(r.headers["Content-Type"] == "application/json" for r in received)
    sent = sorted((json.loads(r.body) for r in received), key=len)
    assert sorted(key for chunk in sent for key in chunk) == keys
    assert [len(chunk) for chunk in sent] == [1, 3, 3]


@pytest.mark.asyncio
async def test_batch_answers_go_through_path_fields_and_arrays(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["1"] = {"user": {"name": "Ada", "n": {"age": 36}}}
    http_server.data["2"] = {"user": [{"name": "B1"}, {"name": "B2"}]}
    http_server.data["3"] = {"user": {"name": "C", "n": {"age": "old"}}}
    source = make_source(
        batch_url=http_server.url(BATCH_PATH), path="user", fields={"age": "n.age"}
    )

    result = await source.lookup_many([1, 2, 3])

    assert result[1] == ("Ada", 36)
    assert result[2] == [("B1", None), ("B2", None)]
    assert isinstance(result[3], DecodeError)
    assert json.loads(http_server.requests[0].body) == [1, 2, 3]


@pytest.mark.asyncio
async def test_composite_keys_are_sent_as_arrays_and_answered_by_their_json_text(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data['["acme","ü1"]'] = {"name": "Ada"}
    source = make_source("/orgs/{}/users/{}", batch_url=http_server.url(BATCH_PATH))

    result = await source.lookup_many([("acme", "ü1"), ("acme", "u2")])

    assert result == {("acme", "ü1"): ("Ada", None), ("acme", "u2"): None}
    assert json.loads(http_server.requests[0].body) == [["acme", "ü1"], ["acme", "u2"]]


@pytest.mark.asyncio
async def test_a_failed_post_raises_for_the_call_with_retry_after(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.fail_batch(503, retry_after="3")
    source = make_source(batch_url=http_server.url(BATCH_PATH))

    with pytest.raises(LookupFailed) as caught:
        await source.lookup_many(["u1", "u2"])

    assert (caught.value.kind, caught.value.retryable) == ("status:503", True)
    assert caught.value.retry_after == 3.0
    assert len(http_server.requests) == 1


@pytest.mark.asyncio
async def test_a_404_from_the_batch_endpoint_is_an_error_not_a_miss(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.fail_batch(404)
    source = make_source(batch_url=http_server.url(BATCH_PATH))

    with pytest.raises(LookupFailed) as caught:
        await source.lookup_many(["u1"])

    assert (caught.value.kind, caught.value.retryable) == ("status:404", False)


@pytest.mark.asyncio
async def test_a_failed_chunk_fails_only_its_own_keys(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["good"] = {"name": "Ada"}
    http_server.malformed.add("poison")
    source = make_source(batch_url=http_server.url(BATCH_PATH), max_batch=2)

    result = await source.lookup_many(["good", "other", "poison", "victim"])

    assert result["good"] == ("Ada", None)
    assert result["other"] is None
    assert isinstance(result["poison"], DecodeError)
    assert result["victim"] is result["poison"]


@pytest.mark.asyncio
async def test_a_malformed_batch_answer_raises_decode_error(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.malformed.add("poison")
    source = make_source(batch_url=http_server.url(BATCH_PATH))

    with pytest.raises(DecodeError):
        await source.lookup_many(["poison", "other"])
