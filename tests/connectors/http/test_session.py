"""The process's session: lazy, one per loop, shared by equal sources, closed by aclose()."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable

import pytest

from connectors.http import HttpLookup
from enrich.engine.runtime import run_sync
from tests.connectors.http.conftest import MakeSource
from tests.support.http_server import HttpTestServer


def test_a_source_works_on_several_loops(http_server: HttpTestServer) -> None:
    http_server.data["u1"] = {"name": "Ada"}
    source = HttpLookup(http_server.url("/users/{}"), schema="name string")
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        # Both loops stay open, so each needs a session of its own: aiohttp refuses (or
        # hangs) when a session is used from a loop other than its own.
        assert first.run_until_complete(source.lookup_many(["u1"])) == {"u1": ("Ada",)}
        assert second.run_until_complete(source.lookup_many(["u1"])) == {"u1": ("Ada",)}
        assert first.run_until_complete(source.lookup_many(["u1"])) == {"u1": ("Ada",)}
    finally:
        second.run_until_complete(source.aclose())
        first.run_until_complete(source.aclose())
        second.close()
        first.close()


def test_a_source_works_on_the_runtime_loop(http_server: HttpTestServer) -> None:
    http_server.data["u1"] = {"name": "Ada"}
    source = HttpLookup(http_server.url("/users/{}"), schema="name string")
    try:
        assert run_sync(lambda: source.lookup_many(["u1"]), timeout=10) == {"u1": ("Ada",)}
    finally:
        run_sync(source.aclose, timeout=10)


@pytest.mark.asyncio
async def test_aclose_closes_and_the_next_call_reopens(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {"name": "Ada"}
    source = make_source()

    assert await source.lookup_many(["u1"]) == {"u1": ("Ada", None)}
    await source.aclose()
    await source.aclose()  # closing twice is harmless
    assert await source.lookup_many(["u1"]) == {"u1": ("Ada", None)}


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():  # polling, with a deadline
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


@pytest.mark.asyncio
async def test_aclose_closes_the_connections(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    source = make_source()
    await source.lookup_many(["a", "b", "c"])
    assert http_server.open_connections > 0  # kept alive for the next call

    await source.aclose()

    await _until(lambda: http_server.open_connections == 0, "the connections to close")


@pytest.mark.asyncio
async def test_a_used_source_still_pickles_and_copies_share_its_pool(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.data["u1"] = {"name": "Ada"}
    http_server.set_default_latency(0.05)
    source = make_source(max_connections=2)
    await source.lookup_many(["u1"])

    copy = pickle.loads(pickle.dumps(source))
    keys = [f"k{i}" for i in range(6)]
    await asyncio.gather(source.lookup_many(keys), copy.lookup_many(keys))

    # One pool for both: two connections in all, not two each.
    assert http_server.max_in_flight <= 2
    await copy.aclose()
    # The copy's aclose() closed the shared session; the original reopens one.
    assert await source.lookup_many(["u1"]) == {"u1": ("Ada", None)}


@pytest.mark.asyncio
async def test_cancelling_a_call_cancels_its_requests(
    http_server: HttpTestServer, make_source: MakeSource
) -> None:
    http_server.set_default_latency(30.0)
    source = make_source()
    call = asyncio.ensure_future(source.lookup_many(["a", "b"]))
    await _until(lambda: len(http_server.requests) == 2, "both requests to arrive")

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
