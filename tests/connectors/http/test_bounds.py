"""Bounded answers: a body over max_value_bytes stops being read and fails its key alone."""

from __future__ import annotations

import tracemalloc

import pytest

from connectors.http import HttpLookup
from enrich import LookupFailed
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import HttpTestServer

BIG = 6 * 1024 * 1024
LIMIT = 64 * 1024


@pytest.mark.asyncio
async def test_an_oversized_body_fails_its_key_and_memory_stays_low(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    body = b'{"name": "' + b"x" * BIG + b'"}'
    http_server.large["declared"] = (body, True)  # Content-Length: refused unread
    http_server.large["streamed"] = (body, False)  # chunked: read up to the limit
    http_server.large["small"] = (b'{"name": "Ada"}', False)
    http_server.data["ok"] = {"name": "Bob"}
    source = make_source(max_value_bytes=LIMIT)

    tracemalloc.start()
    try:
        result = await source.lookup_many(["declared", "streamed", "small", "ok"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert result["small"] == ("Ada", None)
    assert result["ok"] == ("Bob", None)
    for key in ("declared", "streamed"):
        error = result[key]
        assert isinstance(error, LookupFailed)
        assert (error.kind, error.retryable) == ("too_large", False)
        assert f"max_value_bytes={LIMIT}" in str(error)
    assert f"Content-Length {len(body)}" in str(result["declared"])
    # Reading either body whole would hold its 6 MiB (twice, with the join of chunks).
    assert peak < 2 * 1024 * 1024, f"peak {peak} bytes"


@pytest.mark.asyncio
async def test_a_body_at_the_limit_is_read(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    body = b'{"name": "' + b"y" * (LIMIT - 12) + b'"}'
    assert len(body) == LIMIT
    http_server.large["exact"] = (body, False)
    http_server.large["declared"] = (body, True)

    result = await make_source(max_value_bytes=LIMIT).lookup_many(["exact", "declared"])

    assert result["exact"] == result["declared"] == ("y" * (LIMIT - 12), None)


def test_max_value_bytes_is_validated_and_shown() -> None:
    with pytest.raises(ValueError, match="max_value_bytes must be an int > 0, got 0"):
        HttpLookup("http://svc/{}", schema="a int", max_value_bytes=0)
    assert "max_value_bytes=1024" in repr(
        HttpLookup("http://svc/{}", schema="a int", max_value_bytes=1024)
    )
    assert "max_value_bytes" not in repr(HttpLookup("http://svc/{}", schema="a int"))
