"""Redirects: not followed by default; same-origin only when allowed; headers never leave."""

from __future__ import annotations

import logging

import pytest

import enrich
from connectors.http import HttpLookup
from enrich import LookupFailed
from enrich.engine.runtime import run_sync
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import HttpTestServer

API_KEY = "s3cret-api-key-5e1f"
TOKEN = "s3cret-redirect-token-77"


def _received_keys(server: HttpTestServer) -> list[str | None]:
    return [request.key for request in server.requests]


def test_a_redirect_elsewhere_is_refused_and_the_row_gets_the_reason(
    http_server: HttpTestServer, elsewhere: HttpTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    elsewhere.data["k"] = {"name": "impostor"}
    http_server.redirect("k", elsewhere.url(f"/users/k?token={TOKEN}"))
    http_server.data["ok"] = {"name": "Ada"}
    source = HttpLookup(
        http_server.url("/users/{}"), schema="name string", headers={"X-Api-Key": API_KEY}
    )

    try:
        rows = list(
            enrich.lookup_rows(
                [{"id": "k"}, {"id": "ok"}], source, on="id", on_error="error_column", timeout=5.0
            )
        )
    finally:
        run_sync(source.aclose, timeout=10)

    assert rows[1] == {"id": "ok", "name": "Ada", "enrich_error": None}
    assert rows[0]["name"] is None
    reason = rows[0]["enrich_error"]
    assert "redirect" in reason and "refused" in reason
    assert f"127.0.0.1:{elsewhere.port}/users/k?token=***" in reason
    assert elsewhere.requests == []  # the API key never reached the other origin
    assert [r.headers.get("X-Api-Key") for r in http_server.requests] == [API_KEY, API_KEY]
    for secret in (TOKEN, API_KEY):
        assert secret not in reason and secret not in caplog.text


@pytest.mark.asyncio
async def test_same_origin_redirects_are_followed_only_when_allowed(
    http_server: HttpTestServer, elsewhere: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.redirect("old", http_server.url("/users/new"), status=301)
    http_server.redirect("rel", "/users/new", status=307)  # a relative Location
    http_server.redirect("away", elsewhere.url("/users/away"))
    http_server.data["new"] = {"name": "Ada"}
    elsewhere.data["away"] = {"name": "impostor"}
    never = make_source(headers={"X-Api-Key": API_KEY})
    same = make_source(headers={"X-Api-Key": API_KEY}, follow_redirects="same-origin")

    refused = await never.lookup_many(["old"])
    followed = await same.lookup_many(["old", "rel", "away"])

    error = refused["old"]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable) == ("redirect", False)
    assert "follow_redirects='never'" in str(error)
    assert followed["old"] == followed["rel"] == ("Ada", None)
    away = followed["away"]
    assert isinstance(away, LookupFailed) and away.kind == "redirect"
    assert "another origin" in str(away)
    assert elsewhere.requests == []
    assert all(r.headers.get("X-Api-Key") == API_KEY for r in http_server.requests)
    assert _received_keys(http_server).count("new") == 2


@pytest.mark.asyncio
async def test_other_schemes_and_ports_are_other_origins(
    http_server: HttpTestServer, elsewhere: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.redirect("down", f"https://127.0.0.1:{http_server.port}/users/x")
    http_server.redirect("port", elsewhere.url("/users/x"))
    source = make_source(follow_redirects="same-origin")

    result = await source.lookup_many(["down", "port"])

    for key in ("down", "port"):
        assert isinstance(result[key], LookupFailed) and result[key].kind == "redirect"
    assert elsewhere.requests == []


@pytest.mark.asyncio
async def test_redirect_loops_stop(http_server: HttpTestServer, make_source: MakeSource) -> None:
    http_server.redirect("loop", http_server.url("/users/loop"))
    source = make_source(follow_redirects="same-origin")

    error = (await source.lookup_many(["loop"]))["loop"]

    assert isinstance(error, LookupFailed) and "more than 5 redirects" in str(error)
    assert len(http_server.requests) == 6


def test_follow_redirects_is_validated() -> None:
    with pytest.raises(ValueError, match="follow_redirects must be one of"):
        HttpLookup("http://svc/{}", schema="a int", follow_redirects="always")  # type: ignore[arg-type]
