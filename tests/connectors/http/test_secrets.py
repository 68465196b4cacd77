"""Secrets (headers, credentials, query values of templates) never leak into text."""

from __future__ import annotations

import base64
import logging
import traceback

import pytest

from connectors.http import HttpLookup
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import BATCH_PATH, HttpTestServer, free_port

SECRETS = ("s3cret-header", "s3cret-query", "pa55word", "s3cret-batch")


def _texts(error: BaseException) -> str:
    return "\n".join([str(error), repr(error), *traceback.format_exception(error), str(error.args)])


@pytest.mark.asyncio
async def test_secrets_are_sent_but_never_shown(
    http_server: HttpTestServer, make_source: MakeSource, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    http_server.data["ok"] = {"name": "Ada"}
    http_server.fail("down", 500)
    http_server.fail("denied", 401)
    http_server.fail("busy", 429, retry_after="1")
    http_server.malformed.add("garbled")
    http_server.drop.add("cut")
    http_server.latency["slow"] = 30.0
    # Only the slow key meets the short timeout: on a busy machine, another key's answer
    # could take longer than it and turn into a timeout too.
    header_source, slow_source = (
        make_source(
            "/users/{}?api_key=s3cret-query", headers={"X-Api-Key": "s3cret-header"}, timeout=t
        )
        for t in (30.0, 0.3)
    )
    auth_source = make_source("/users/{}", auth=("ada", "pa55word"))
    keys = ["ok", "down", "denied", "busy", "garbled", "cut"]

    results = [
        await header_source.lookup_many(keys),
        await slow_source.lookup_many(["slow"]),
        await auth_source.lookup_many(["down"]),
    ]

    assert results[0]["ok"] == ("Ada", None)
    errors = [value for result in results for value in result.values() if value is not None]
    errors = [error for error in errors if isinstance(error, Exception)]
    assert len(errors) == 7
    received = http_server.requests
    assert any(r.headers.get("X-Api-Key") == "s3cret-header" for r in received)
    assert any("api_key=s3cret-query" in r.raw_path for r in received)
    basic = "Basic " + base64.b64encode(b"ada:pa55word").decode()
    assert any(r.headers.get("Authorization") == basic for r in received)
    shown = "\n".join(
        [
            *(_texts(error) for error in errors),
            repr(header_source),
            repr(slow_source),
            repr(auth_source),
            repr(header_source._settings),  # the key of its session in the process registry
            repr(auth_source._settings),
            caplog.text,
            *(record.getMessage() for record in caplog.records),
        ]
    )
    assert "api_key=***" in shown
    assert any(record.name == "connectors.http" for record in caplog.records)
    for secret in (*SECRETS, basic.split()[1]):
        assert secret not in shown


@pytest.mark.asyncio
async def test_connection_and_batch_errors_do_not_show_secrets(
    http_server: HttpTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    http_server.fail_batch(503)
    refused = HttpLookup(
        f"http://127.0.0.1:{free_port()}/users/{{}}?api_key=s3cret-query",
        schema="name string",
        auth=("ada", "pa55word"),
    )
    batch = HttpLookup(
        http_server.url("/users/{}"),
        schema="name string",
        headers={"Authorization": "Bearer s3cret-header"},
        batch_url=http_server.url(BATCH_PATH + "?token=s3cret-batch"),
    )
    try:
        refused_error = (await refused.lookup_many(["k"]))["k"]
        with pytest.raises(Exception) as caught:
            await batch.lookup_many(["k"])
    finally:
        await refused.aclose()
        await batch.aclose()

    assert isinstance(refused_error, Exception)
    shown = "\n".join([_texts(refused_error), _texts(caught.value), caplog.text])
    assert "token=***" in shown
    for secret in SECRETS:
        assert secret not in shown


@pytest.mark.parametrize(
    "url",
    [
        "http://ada:pa55word@svc/users/{}",
        "http://svc/users/{}?sig=s3cret-query#frag",
        "ftp://svc/users/{}?token=s3cret-query",
    ],
)
def test_validation_errors_do_not_show_url_secrets(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        HttpLookup(url, schema="name string")
    assert "***" in str(caught.value)
    for secret in SECRETS:
        assert secret not in str(caught.value)
