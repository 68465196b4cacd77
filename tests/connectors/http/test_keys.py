"""Hostile keys: a key fills exactly one path segment (or query value), intact."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote

import pytest

from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import HttpTestServer

HOSTILE_KEYS = [
    "../admin",
    "..",
    ".",
    "a?x=1",
    "a#b",
    "a/b",
    "a%2Fb",
    "with space",
    "tab\there",
    "new\nline",
    "plus+and&amp=",
    "ünïcødé-名前-🙂",
    "http://evil.example/",
    "@evil.example",
    "x" * 10_000,
    "é" * 10_000,
]


@pytest.mark.asyncio
async def test_hostile_keys_arrive_as_exactly_one_intact_path_segment(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    for key in HOSTILE_KEYS:
        http_server.data[key] = {"name": key[:20]}
    source = make_source("/users/{}")

    result = await source.lookup_many(HOSTILE_KEYS)

    assert result == {key: (key[:20], None) for key in HOSTILE_KEYS}
    received = http_server.requests
    assert len(received) == len(HOSTILE_KEYS)
    for request in received:
        assert "?" not in request.raw_path and "#" not in request.raw_path
        first, segment = request.segments
        assert first == "users"
        assert segment not in (".", "..")
    assert {unquote(request.segments[1]) for request in received} == set(HOSTILE_KEYS)


@pytest.mark.asyncio
async def test_hostile_keys_keep_the_rest_of_the_path(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    source = make_source("/users/{}/profile")

    result = await source.lookup_many(HOSTILE_KEYS)

    assert result == dict.fromkeys(HOSTILE_KEYS)  # the server knows no such profiles
    received = http_server.requests
    assert len(received) == len(HOSTILE_KEYS)
    segments = [request.segments for request in received]
    assert all(len(parts) == 3 and parts[0::2] == ["users", "profile"] for parts in segments)
    assert {unquote(parts[1]) for parts in segments} == set(HOSTILE_KEYS)


@pytest.mark.asyncio
async def test_hostile_keys_in_a_query_value_stay_in_that_value(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    keys = ["a&id=evil", "b#frag", "c=d", "e+f g", "../x?y"]
    for key in keys:
        http_server.data[key] = {"name": key}
    source = make_source("/search?id={}&v=2")

    result = await source.lookup_many(keys)

    assert result == {key: (key, None) for key in keys}
    for request in http_server.requests:
        path, _, query = request.raw_path.partition("?")
        assert path == "/search"
        pairs = parse_qsl(query, keep_blank_values=True)
        assert [name for name, _ in pairs] == ["id", "v"]
        assert pairs[0][1] in keys and pairs[1][1] == "2"


@pytest.mark.asyncio
async def test_non_string_keys_are_sent_as_their_str(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["42"] = {"name": "int"}
    http_server.data["1.5"] = {"name": "float"}

    result = await make_source().lookup_many([42, 1.5])

    assert result == {42: ("int", None), 1.5: ("float", None)}
