"""Async functions calling the demo service's scoring endpoints: the examples of
``async_map`` and ``register_async_udf`` (``examples/``, ``docs/async-map.md``).

:class:`Score` is Flink's shape: an :class:`~enrich.AsyncFunction` whose session is opened
once per Python worker process, POSTing each row's columns to ``/score``.
:class:`ScoreMany` is the batched form: one POST of a list of rows to ``/score/_batch``,
one result per row. Both take the service's base URL (``enrich dim-server``'s by
default, or ``ENRICH_DIMENSION_URL``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import aiohttp

from .. import AsyncFunction

DEFAULT_URL = "http://127.0.0.1:18080"


def service_url(url: str | None = None) -> str:
    """``url``, else ``ENRICH_DIMENSION_URL``, else the demo service's default."""
    return (url or os.environ.get("ENRICH_DIMENSION_URL") or DEFAULT_URL).rstrip("/")


def _body(value: Any) -> bytes:
    # Rows may hold dates, timestamps and decimals: they travel as their text.
    return json.dumps(value, default=str).encode()


class Score(AsyncFunction):
    """``POST {url}/score`` with a row's columns; the row gains ``score`` and ``label``.

    Args:
        url: the service's base URL.
        columns: the columns sent (default: all of the row's).

    ``check_row`` is the row ``enrich check`` calls it with when a config's step names
    none: a config using it as it is gets its service tried, and a service that is down
    named in one line.
    """

    check_row: dict[str, Any] = {"order_id": 1, "user_id": 1, "amount": 2.5}  # noqa: RUF012

    def __init__(self, url: str | None = None, columns: list[str] | None = None) -> None:
        self.url = service_url(url)
        self.columns = columns
        self.session: aiohttp.ClientSession | None = None

    def __eq__(self, other: object) -> bool:  # equal settings, equal functions (configs)
        return type(other) is Score and (other.url, other.columns) == (self.url, self.columns)

    def __hash__(self) -> int:
        return hash((Score, self.url, tuple(self.columns or ())))

    async def open(self) -> None:
        self.session = aiohttp.ClientSession(headers={"Content-Type": "application/json"})

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def invoke(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        assert self.session is not None, "invoke() before open()"
        sent = row if self.columns is None else {c: row[c] for c in self.columns}
        async with self.session.post(f"{self.url}/score", data=_body(sent)) as response:
            response.raise_for_status()
            return [await response.json()]


class ScoreMany:
    """``async def fn(rows)``: one ``POST {url}/score/_batch`` per call (give
    ``batch_size=``), one ``{score, label}`` per row, in order."""

    check_row: dict[str, Any] = {"order_id": 1, "user_id": 1, "amount": 2.5}  # noqa: RUF012

    def __init__(self, url: str | None = None, columns: list[str] | None = None) -> None:
        self.url = service_url(url)
        self.columns = columns

    def __eq__(self, other: object) -> bool:
        return type(other) is ScoreMany and (other.url, other.columns) == (self.url, self.columns)

    def __hash__(self) -> int:
        return hash((ScoreMany, self.url, tuple(self.columns or ())))

    async def __call__(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        sent = rows if self.columns is None else [{c: r[c] for c in self.columns} for r in rows]
        async with _session().post(f"{self.url}/score/_batch", data=_body(sent)) as response:
            response.raise_for_status()
            results: list[dict[str, Any]] = await response.json()
            return results


_sessions: dict[tuple[int, int], aiohttp.ClientSession] = {}


def _session() -> aiohttp.ClientSession:
    """This process's session on the running loop (an aiohttp session is bound to one)."""
    import asyncio

    key = (os.getpid(), id(asyncio.get_running_loop()))
    session = _sessions.get(key)
    if session is None or session.closed:
        session = _sessions[key] = aiohttp.ClientSession(
            headers={"Content-Type": "application/json"}
        )
    return session
