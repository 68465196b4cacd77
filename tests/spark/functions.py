"""Async functions for the async_map tests, importable by Spark's Python workers.

They call the tests' real aiohttp server (tests.support.http_server): ``GET
{url}/{key}`` answers the scripted document, 404 for an unknown key.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

import aiohttp

from enrich import AsyncFunction, ResultFuture


class Lookup(AsyncFunction):
    """Flink's shape: a session per process opened in ``open()``; ``invoke`` returns a
    list of dicts (the server's document, none for a 404). Each ``open()`` is announced
    to the server as ``GET {url}/open?id=open-<pid>``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"{self.url}/open", params={"id": f"open-{os.getpid()}"}):
            pass

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def invoke(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        assert self.session is not None, "invoke() before open()"
        async with self.session.get(f"{self.url}/{row['key']}") as response:
            if response.status == 404:
                return []
            response.raise_for_status()
            return [await response.json()]


class Fetch:
    """``async def fn(row) -> dict | None`` as a picklable object: the server's document
    (None for a 404), with a session per process and loop."""

    _sessions: ClassVar[dict[tuple[int, int], aiohttp.ClientSession]] = {}

    def __init__(self, url: str, field: str = "key") -> None:
        self.url = url
        self.field = field

    async def __call__(self, row: dict[str, Any]) -> dict[str, Any] | None:
        async with session().get(f"{self.url}/{row[self.field]}") as response:
            if response.status == 404:
                return None
            response.raise_for_status()
            found: dict[str, Any] = await response.json()
            return found


class FetchMany:
    """``async def fn(rows) -> list``: one ``POST {url}/batch`` per call, one result per
    row (None where the server had nothing)."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __call__(self, rows: list[dict[str, Any]]) -> list[Any]:
        keys = [row["key"] for row in rows]
        async with session().post(f"{self.url}/batch", json=keys) as response:
            response.raise_for_status()
            found = await response.json()
        return [found.get(key) for key in keys]


class Late(AsyncFunction):
    """Never answers in time; its ``timeout`` hook answers a fallback instead."""

    async def invoke(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        await asyncio.sleep(3600)
        return []

    def timeout(self, row: dict[str, Any], result: ResultFuture) -> None:
        result.complete([{"name": f"fallback-{row['key']}"}])


def session() -> aiohttp.ClientSession:
    """This process's session on the running loop (aiohttp binds one to its loop)."""
    loop = asyncio.get_running_loop()
    key = (os.getpid(), id(loop))
    found = Fetch._sessions.get(key)
    if found is None or found.closed:
        found = Fetch._sessions[key] = aiohttp.ClientSession()
    return found


class HoldFirst:
    """``async def fn(row) -> dict``: the call of the row whose key is ``first`` waits
    until ``others`` other calls of the process completed, so it finishes last however
    busy the machine is (``token`` keeps each test's count apart)."""

    _counts: ClassVar[dict[str, tuple[int, asyncio.Event]]] = {}

    def __init__(self, token: str, first: str, others: int) -> None:
        self.token = token
        self.first = first
        self.others = others

    async def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        done, event = self._counts.setdefault(self.token, (0, asyncio.Event()))
        if row["key"] == self.first:
            await event.wait()
        else:
            await asyncio.sleep(0)
            done, event = self._counts[self.token]
            self._counts[self.token] = (done + 1, event)
            if done + 1 >= self.others:
                event.set()
        return {"seen": row["key"]}


class Echo:
    """``async def fn(row) -> dict``: the names it received, sorted, and ``id + amount``."""

    async def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        identity, amount = row.get("id", row.get("col1")), row.get("amount", row.get("col2"))
        total = None if identity is None or amount is None else identity + amount
        return {"seen": ",".join(sorted(row)), "total": total}


class Double:
    """``async def fn(row) -> dict``: twice the row's ``order_id``."""

    async def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"doubled": row["order_id"] * 2}


class Closing(AsyncFunction):
    """Doubles ``n``; ``close()`` appends a line to a file in ``folder`` (one file per
    process), as a user's buffered writer would flush: a test finds the file after the
    query."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.calls = 0

    async def invoke(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        self.calls += 1
        return [{"twice": 2 * row["n"]}]

    async def close(self) -> None:
        with open(os.path.join(self.folder, f"closed-{os.getpid()}"), "a") as out:
            out.write(f"{self.calls}\n")
