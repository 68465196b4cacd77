"""Successful answers: hits, misses, 1:N, picking sub-documents and fields, decoding."""

from __future__ import annotations

import pytest

from enrich import DecodeError, LookupFailed
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import HttpTestServer


@pytest.mark.asyncio
async def test_hits_and_404_misses(http_server: HttpTestServer, make_source: MakeSource) -> None:
    http_server.data["u1"] = {"name": "Ada", "age": 36, "extra": "ignored"}
    http_server.data["u2"] = {"name": "Bob"}
    source = make_source()

    result = await source.lookup_many(["u1", "u2", "nobody"])

    assert result == {"u1": ("Ada", 36), "u2": ("Bob", None), "nobody": None}
    assert sorted(r.raw_path for r in http_server.requests) == [
        "/users/nobody",
        "/users/u1",
        "/users/u2",
    ]


@pytest.mark.asyncio
async def test_no_keys_no_requests(http_server: HttpTestServer, make_source: MakeSource) -> None:
    assert await make_source().lookup_many([]) == {}
    assert http_server.requests == []


@pytest.mark.asyncio
async def test_a_json_array_is_several_rows(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = [{"name": "Ada", "age": 1}, {"name": "Ada", "age": 2}]
    http_server.data["u2"] = []
    http_server.data["u3"] = None

    result = await make_source().lookup_many(["u1", "u2", "u3"])

    assert result == {"u1": [("Ada", 1), ("Ada", 2)], "u2": [], "u3": None}


@pytest.mark.asyncio
async def test_path_picks_a_sub_document_and_fields_read_nested_paths(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {
        "data": {"user": {"name": "Ada", "account": {"tier": "gold"}, "tier": "wrong"}}
    }
    http_server.data["u2"] = {"data": {"user": {"name": "Bob", "account": None}}}
    http_server.data["u3"] = {"data": {"user": None}}
    http_server.data["u4"] = {"data": {"user": [{"name": "C", "account": {"tier": "a"}}]}}
    source = make_source(
        schema="name string, tier string", path="data.user", fields={"tier": "account.tier"}
    )

    result = await source.lookup_many(["u1", "u2", "u3", "u4"])

    assert result == {
        "u1": ("Ada", "gold"),
        "u2": ("Bob", None),
        "u3": None,
        "u4": [("C", "a")],
    }


@pytest.mark.asyncio
async def test_path_steps_index_arrays(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {"items": [{"name": "first"}, {"name": "second"}]}
    source = make_source(schema="name string", path="items.1")

    assert await source.lookup_many(["u1"]) == {"u1": ("second",)}


@pytest.mark.asyncio
async def test_composite_keys_fill_slots_in_order(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {"name": "Ada"}
    source = make_source("/orgs/{}/users/{}")

    result = await source.lookup_many([("acme corp", "u1")])

    assert result == {("acme corp", "u1"): ("Ada", None)}
    assert [r.raw_path for r in http_server.requests] == ["/orgs/acme%20corp/users/u1"]


@pytest.mark.asyncio
async def test_a_key_that_does_not_fit_the_slots_fails_alone(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {"name": "Ada"}
    source = make_source("/orgs/{}/users/{}")

    result = await source.lookup_many([("acme", "u1"), "lonely", ("acme", None)])

    assert result[("acme", "u1")] == ("Ada", None)
    for key in ("lonely", ("acme", None)):
        error = result[key]
        assert isinstance(error, LookupFailed)
        assert (error.kind, error.retryable, error.key) == ("key", False, key)
    assert len(http_server.requests) == 1


@pytest.mark.asyncio
async def test_malformed_json_is_that_keys_decode_error(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["good"] = {"name": "Ada"}
    http_server.malformed.add("bad")

    result = await make_source().lookup_many(["good", "bad"])

    assert result["good"] == ("Ada", None)
    assert isinstance(result["bad"], DecodeError)
    assert "not JSON" in str(result["bad"])


@pytest.mark.asyncio
async def test_a_value_that_does_not_fit_the_schema_is_that_keys_decode_error(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["good"] = {"name": "Ada", "age": 3}
    http_server.data["bad"] = {"name": "Bob", "age": "old"}
    http_server.data["scalar"] = 42

    result = await make_source().lookup_many(["good", "bad", "scalar"])

    assert result["good"] == ("Ada", 3)
    assert isinstance(result["bad"], DecodeError)
    assert result["bad"].field == "age"
    assert isinstance(result["scalar"], DecodeError)


@pytest.mark.asyncio
async def test_a_path_through_a_scalar_is_a_decode_error(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {"data": "oops"}
    source = make_source(path="data.user")

    result = await source.lookup_many(["u1"])

    assert isinstance(result["u1"], DecodeError)
    assert "data.user" in str(result["u1"])


@pytest.mark.asyncio
async def test_post_method_is_used_per_key(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {"name": "Ada"}

    result = await make_source(method="post").lookup_many(["u1"])

    assert result == {"u1": ("Ada", None)}
    assert [r.method for r in http_server.requests] == ["POST"]
