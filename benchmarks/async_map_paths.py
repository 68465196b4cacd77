"""The executor side of ``benchmarks/async_map.py``'s contenders: every one sends the
same per-row (or per-batch) POSTs of a row's columns to the scoring service
(``benchmarks/score_service.py``) and adds the same two fields, ``score`` and ``label``.

Module-level, so that Spark's Python workers import them (the repository root is on
their PYTHONPATH) and ``tests/integration/test_async_map_references.py`` checks that they
agree row for row.

* :class:`PostRow`: ``async_map``'s function, Flink's shape (a session per worker
  process, opened on the worker's loop), one POST per row;
* :class:`PostMany`: the batched form, one POST of up to ``batch_size`` rows;
* :func:`gather_per_batch`: the ``mapInPandas`` body users write by hand: per Arrow
  batch, ``asyncio.gather`` of one POST per row under a semaphore, one aiohttp session
  (and event loop) per task;
* :func:`post_per_row`: the body of Spark's own concurrent row UDF (an Arrow-optimized
  ``F.udf`` run by ``spark.sql.execution.pythonUDF.arrow.concurrency.level`` threads per
  worker): one ``requests`` POST per row on a pooled session;
* :func:`fast_row`: the fast non-network function of the memory run, which drops,
  fails and multiplies some rows so that every kind of outcome is counted.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp

import enrich

RETURNS = "score double, label string"
STRUCT = "struct<score: double, label: string>"
COLUMNS = ("id", "user_id", "amount")


class _Posting(enrich.AsyncFunction):
    """An aiohttp session per worker, opened and closed with the function."""

    path = ""

    def __init__(self, base: str) -> None:
        self.url = f"{base}{self.path}"
        self.session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        self.session = aiohttp.ClientSession()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


class PostRow(_Posting):
    """``POST {base}/score`` with the row's columns; answers ``[{score, label}]``."""

    path = "/score"

    async def invoke(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        assert self.session is not None
        async with self.session.post(self.url, json=row) as response:
            response.raise_for_status()
            return [await response.json()]


class PostMany(_Posting):
    """``POST {base}/score/_batch`` with a list of rows; one ``{score, label}`` per row."""

    path = "/score/_batch"

    async def invoke(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert self.session is not None
        async with self.session.post(self.url, json=rows) as response:
            response.raise_for_status()
            results: list[dict[str, Any]] = await response.json()
            return results


def gather_per_batch(
    base: str, capacity: int = 100, *, uvloop: bool = False
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The hand-written ``mapInPandas`` body: per batch (a pandas frame), one POST per
    row, ``capacity`` at most in flight, gathered; then the next batch. One event loop
    and one aiohttp session per task (per call of the body); with ``uvloop``, on
    uvloop's loop instead of asyncio's."""
    url = f"{base}/score"

    def score_frames(frames: Iterator[Any]) -> Iterator[Any]:
        if uvloop:
            import uvloop as _uvloop

            loop = _uvloop.new_event_loop()
        else:
            loop = asyncio.new_event_loop()

        async def opened() -> aiohttp.ClientSession:
            return aiohttp.ClientSession()

        session = loop.run_until_complete(opened())
        slots = asyncio.Semaphore(capacity)

        async def one(row: dict[str, Any]) -> dict[str, Any]:
            async with slots, session.post(url, json=row) as response:
                response.raise_for_status()
                result: dict[str, Any] = await response.json()
                return result

        async def batch(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return await asyncio.gather(*(one(row) for row in rows))

        try:
            for frame in frames:
                results = loop.run_until_complete(batch(frame.to_dict("records")))
                yield frame.assign(
                    score=[r["score"] for r in results], label=[r["label"] for r in results]
                )
        finally:
            loop.run_until_complete(session.close())
            loop.close()

    return score_frames


_sessions: dict[int, Any] = {}
# Connections of a worker's pooled session: enough for the highest concurrency level tried.
POOL = 128


def post_per_row(base: str) -> Callable[..., tuple[float, str]]:
    """The body of Spark's concurrent row UDF: one POST per row on one ``requests``
    session per worker process (its pool shared by the UDF's threads)."""
    url = f"{base}/score"

    def score_row(id: int, user_id: int, amount: float) -> tuple[float, str]:
        import requests

        session = _sessions.get(os.getpid())
        if session is None:
            session = _sessions[os.getpid()] = requests.Session()
            session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=POOL))
        row = {"id": id, "user_id": user_id, "amount": amount}
        response = session.post(url, json=row, timeout=30)
        response.raise_for_status()
        result = response.json()
        return (result["score"], result["label"])

    return score_row


# The memory run's outcomes, by ``id % 1000``: dropped (an empty list), failed (raises),
# two rows (1:N); every other row one.
DROPPED, FAILED, DOUBLE = 3, 7, 9


async def fast_row(row: dict[str, Any]) -> Any:
    """No network: ``{"twice": 2 * id}``, except the rows named above."""
    key = row["id"]
    kind = key % 1000
    if kind == DROPPED:
        return []
    if kind == FAILED:
        raise ValueError(f"refused row {key}")
    if kind == DOUBLE:
        return [{"twice": 2 * key}, {"twice": 2 * key + 1}]
    return {"twice": 2 * key}
