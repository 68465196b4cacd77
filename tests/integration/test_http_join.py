"""The lookup join against a real aiohttp server: one request per distinct key, error
policies fed by real failures, Retry-After, and hostile keys."""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import unquote

import pytest

import enrich
from enrich import FixedDelayRetry, lookup_rows
from tests.integration.conftest import MakeHttp
from tests.support.http_server import HttpTestServer


def people(*keys: Any) -> list[dict[str, Any]]:
    return [{"n": n, "uid": key} for n, key in enumerate(keys)]


def test_a_thousand_rows_over_ten_keys_make_one_request_per_key(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    for k in range(9):  # u9 is a miss (404)
        http_server.data[f"u{k}"] = {"name": f"name{k}", "age": k}
    http_server.data["u0"] = [{"name": "zero", "age": 0}, {"name": "nil", "age": 0}]  # 1:N
    data = [{"i": i, "uid": f"u{i % 10}"} for i in range(1000)]
    out = list(lookup_rows(data, make_http(), on="uid", capacity=1000))
    expected: list[dict[str, Any]] = []
    for row in data:
        k = int(row["uid"][1:])
        if k == 0:
            expected += [{**row, "name": "zero", "age": 0}, {**row, "name": "nil", "age": 0}]
        else:
            expected.append(
                {**row, "name": f"name{k}" if k < 9 else None, "age": k if k < 9 else None}
            )
    assert out == expected
    received = sorted(r.key for r in http_server.requests if r.key is not None)
    assert received == [f"u{k}" for k in range(10)]
    assert len(http_server.requests) == 10


@pytest.fixture
def failing(http_server: HttpTestServer) -> HttpTestServer:
    http_server.data.update({"ok": {"name": "Ada", "age": 36}, "ok2": {"name": "Bob", "age": 7}})
    http_server.fail("e500", 500)
    http_server.fail("e401", 401)
    http_server.malformed.add("bad")
    http_server.data["wrongtype"] = {"name": "Cy", "age": "not a number"}
    return http_server


def test_error_column_names_each_kind_of_real_failure(
    failing: HttpTestServer, make_http: MakeHttp
) -> None:
    source = make_http()
    target = f"GET {failing.url('/users/{}')}"
    data = people("ok", "e500", "e401", "bad", "wrongtype", "nobody", "ok2")
    out = list(lookup_rows(data, source, on="uid", on_error="error_column"))
    assert out == [
        {"n": 0, "uid": "ok", "name": "Ada", "age": 36, "enrich_error": None},
        {"n": 1, "uid": "e500", "name": None, "age": None,
         "enrich_error": f"status:500: {target} for key 'e500': HTTP 500"},
        {"n": 2, "uid": "e401", "name": None, "age": None,
         "enrich_error": f"status:401: {target} for key 'e401': HTTP 401 (check the credentials)"},
        {"n": 3, "uid": "bad", "name": None, "age": None,
         "enrich_error": """decode: response is not JSON: b'{"name": "Ada", oops'"""},
        {"n": 4, "uid": "wrongtype", "name": None, "age": None,
         "enrich_error": "decode: field 'age': cannot read 'not a number' as int"},
        {"n": 5, "uid": "nobody", "name": None, "age": None, "enrich_error": None},
        {"n": 6, "uid": "ok2", "name": "Bob", "age": 7, "enrich_error": None},
    ]  # fmt: skip


def test_null_policy_turns_failures_into_null_rows(
    failing: HttpTestServer, make_http: MakeHttp
) -> None:
    data = people("ok", "e500", "e401", "bad", "wrongtype", "nobody", "ok2")
    out = list(lookup_rows(data, make_http(), on="uid", on_error="null"))
    assert [(r["uid"], r["name"]) for r in out] == [
        ("ok", "Ada"), ("e500", None), ("e401", None), ("bad", None),
        ("wrongtype", None), ("nobody", None), ("ok2", "Bob"),
    ]  # fmt: skip
    assert all("enrich_error" not in r for r in out)


@pytest.mark.parametrize("how", ["left", "inner"])
def test_drop_policy_drops_failed_rows_only(
    failing: HttpTestServer, make_http: MakeHttp, how: str
) -> None:
    data = people("ok", "e500", "e401", "bad", "wrongtype", "nobody", "ok2")
    out = list(lookup_rows(data, make_http(), on="uid", on_error="drop", how=how))
    kept = ["ok", "nobody", "ok2"] if how == "left" else ["ok", "ok2"]
    assert [r["uid"] for r in out] == kept


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [
        ("e500", enrich.LookupFailed, r"for key 'e500': HTTP 500$"),
        ("e401", enrich.SourceUnavailable, r"for key 'e401': HTTP 401 \(check the credentials\)"),
        ("bad", enrich.DecodeError, r"^response is not JSON"),
    ],
)
def test_fail_policy_raises_the_real_error_after_the_rows_before_it(
    failing: HttpTestServer, make_http: MakeHttp, key: str, error: type[Exception], message: str
) -> None:
    it = lookup_rows(people("ok", key, "ok2"), make_http(), on="uid", capacity=1)
    assert next(it)["name"] == "Ada"
    with pytest.raises(error, match=message) as raised:
        next(it)
    assert getattr(raised.value, "key", key) == key
    assert raised.value.kind == ("decode" if key == "bad" else f"status:{key[1:]}")


def test_a_503_with_retry_after_is_retried_no_sooner_than_the_server_asked(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.data["slowpoke"] = {"name": "Ada", "age": 36}
    http_server.data["fine"] = {"name": "Bob", "age": 7}
    http_server.fail("slowpoke", 503, retry_after="1", times=2)
    retry = FixedDelayRetry(max_attempts=3, delay=0.01)
    data = people("fine", "slowpoke", "fine")
    out = list(lookup_rows(data, make_http(), on="uid", retry=retry, timeout=5.0))
    assert [(r["uid"], r["name"]) for r in out] == [
        ("fine", "Bob"),
        ("slowpoke", "Ada"),
        ("fine", "Bob"),
    ]
    tries = [r.started for r in http_server.requests if r.key == "slowpoke"]
    assert len(tries) == 3  # 503, 503, 200
    gaps = [later - earlier for earlier, later in itertools.pairwise(tries)]
    # The policy's own delay is 10 ms; only the Retry-After hint explains a second.
    assert all(gap >= 1.0 for gap in gaps), gaps
    assert all(gap < 1.9 for gap in gaps), gaps  # and not much later


def test_a_503_beyond_the_attempts_reaches_the_error_policy_with_its_hint(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.fail("down", 503, retry_after="0.05")
    retry = FixedDelayRetry(max_attempts=2, delay=0.0)
    out = list(
        lookup_rows(people("down"), make_http(), on="uid", retry=retry, on_error="error_column")
    )
    assert out[0]["enrich_error"].endswith("for key 'down': HTTP 503, retry after 0.05s")
    assert len([r for r in http_server.requests if r.key == "down"]) == 2


HOSTILE_KEYS = [
    "../admin",
    "../../etc/passwd",
    "a/b",
    "x?id=other",
    "a?x=1&y=2",
    "with space",
    "frag#ment",
    "pct%2Fencoded",
    "%",
    "ünïcødé/日本",
    "emoji-\U0001f600",
    "semi;colon",
    ".",
    "..",
    "back\\slash",
    "new\nline",
    "L" * 5000,
]


def test_hostile_keys_each_reach_the_server_as_one_segment_and_join_their_own_row(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    for n, key in enumerate(HOSTILE_KEYS):
        http_server.data[key] = {"name": f"row-{n}", "age": n}
    http_server.data["other"] = {"name": "WRONG", "age": -1}
    http_server.data["admin"] = {"name": "WRONG", "age": -1}
    data = people(*HOSTILE_KEYS, *reversed(HOSTILE_KEYS))
    out = list(lookup_rows(data, make_http(), on="uid", capacity=100))
    expected_names = [f"row-{HOSTILE_KEYS.index(r['uid'])}" for r in data]
    assert [(r["n"], r["uid"]) for r in out] == [(r["n"], r["uid"]) for r in data]
    assert [r["name"] for r in out] == expected_names
    received = http_server.requests
    assert len(received) == len(HOSTILE_KEYS)  # each distinct key asked once
    by_key = {}
    for request in received:
        assert request.segments[0] == "users"
        assert len(request.segments) == 2, request.raw_path
        assert "?" not in request.raw_path and "#" not in request.raw_path
        by_key[unquote(request.segments[1])] = request
    assert sorted(by_key) == sorted(HOSTILE_KEYS)
