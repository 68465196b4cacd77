"""Failures: each status and transport error becomes the documented LookupFailed."""

from __future__ import annotations

import email.utils
import time

import pytest

from connectors.http import HttpLookup
from enrich import LookupFailed, SourceUnavailable
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import HttpTestServer, free_port


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [429, 503])
async def test_throttling_statuses_are_retryable_with_retry_after_seconds(
    http_server: HttpTestServer, make_source: MakeSource, status: int
) -> None:
    http_server.data["ok"] = {"name": "Ada"}
    http_server.fail("busy", status, retry_after="7")

    result = await make_source().lookup_many(["ok", "busy"])

    assert result["ok"] == ("Ada", None)
    error = result["busy"]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable, error.retry_after) == (f"status:{status}", True, 7.0)
    assert error.key == "busy"


@pytest.mark.asyncio
async def test_retry_after_as_an_http_date(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.fail("busy", 503, retry_after=email.utils.formatdate(time.time() + 60, usegmt=True))

    error = (await make_source().lookup_many(["busy"]))["busy"]

    assert isinstance(error, LookupFailed)
    assert error.retry_after is not None
    assert 50 <= error.retry_after <= 61


@pytest.mark.asyncio
async def test_503_without_retry_after_has_no_hint(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.fail("busy", 503)

    error = (await make_source().lookup_many(["busy"]))["busy"]

    assert isinstance(error, LookupFailed)
    assert (error.retryable, error.retry_after) == (True, None)


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [500, 502, 504, 408])
async def test_server_errors_are_retryable(
    http_server: HttpTestServer, make_source: MakeSource, status: int
) -> None:
    http_server.fail("k", status)

    error = (await make_source().lookup_many(["k"]))["k"]

    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable) == (f"status:{status}", True)


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [401, 403])
async def test_authentication_failures_are_source_unavailable_and_final(
    http_server: HttpTestServer, make_source: MakeSource, status: int
) -> None:
    http_server.fail("k", status)

    error = (await make_source().lookup_many(["k"]))["k"]

    assert isinstance(error, SourceUnavailable)
    assert (error.kind, error.retryable) == (f"status:{status}", False)


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [400, 410, 422])
async def test_other_client_errors_are_not_retryable(
    http_server: HttpTestServer, make_source: MakeSource, status: int
) -> None:
    http_server.fail("k", status, retry_after="5")

    error = (await make_source().lookup_many(["k"]))["k"]

    assert isinstance(error, LookupFailed)
    assert not isinstance(error, SourceUnavailable)
    assert (error.kind, error.retryable, error.retry_after) == (f"status:{status}", False, None)


@pytest.mark.asyncio
async def test_one_attempt_per_call(http_server: HttpTestServer, make_source: MakeSource) -> None:
    http_server.fail("k", 503, retry_after="0")

    await make_source().lookup_many(["k"])

    assert len(http_server.requests) == 1


@pytest.mark.asyncio
async def test_a_dropped_connection_is_a_retryable_failure_of_that_key(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["ok"] = {"name": "Ada"}
    http_server.drop.add("cut")

    result = await make_source().lookup_many(["ok", "cut"])

    assert result["ok"] == ("Ada", None)
    error = result["cut"]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable, error.key) == ("connection", True, "cut")


@pytest.mark.asyncio
async def test_a_slow_answer_times_out_retryably(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["fast"] = {"name": "Ada"}
    http_server.data["slow"] = {"name": "Bob"}
    http_server.latency["slow"] = 30.0

    # The fast key gets a timeout no busy machine reaches; only the slow key meets 0.2 s.
    started = time.monotonic()
    fast = await make_source(timeout=30.0).lookup_many(["fast"])
    result = await make_source(timeout=0.2).lookup_many(["slow"])

    assert time.monotonic() - started < 10
    assert fast["fast"] == ("Ada", None)
    error = result["slow"]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable) == ("timeout", True)


@pytest.mark.asyncio
async def test_connection_refused_is_source_unavailable_and_retryable() -> None:
    source = HttpLookup(f"http://127.0.0.1:{free_port()}/users/{{}}", schema="name string")
    try:
        error = (await source.lookup_many(["k"]))["k"]
    finally:
        await source.aclose()

    assert isinstance(error, SourceUnavailable)
    assert (error.kind, error.retryable) == ("connection", True)
