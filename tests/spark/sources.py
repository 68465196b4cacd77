"""Lookup sources for the Spark tests, importable by Spark's Python workers."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from enrich import Schema


class PidSource:
    """Answers every key with the id of the process that looked it up, and the key."""

    schema = Schema.of("pid bigint, echo string")

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        pid = os.getpid()
        return {key: (pid, str(key)) for key in keys}

    async def aclose(self) -> None:
        pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PidSource)

    def __hash__(self) -> int:
        return hash(PidSource)


class ShuffledLatencySource:
    """Echoes keys after a delay that depends on the key, so completions come out of order."""

    schema = Schema.of("echo string")

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        import asyncio

        await asyncio.sleep(0.001 * (hash(str(keys[0])) % 7))
        return {key: (str(key),) for key in keys}

    async def aclose(self) -> None:
        pass


class RowByRow:
    """A source's ``lookup_many`` and ``lookup_each`` without its columnar lookup, so a
    join against it takes the per-row path: what a columnar source's join gave before."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.schema = source.schema

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        found: Mapping[Any, Any] = await self.source.lookup_many(keys)
        return found

    def lookup_each(self, keys: Sequence[Any]) -> Any:
        return self.source.lookup_each(keys)

    async def aclose(self) -> None:
        await self.source.aclose()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowByRow) and other.source == self.source

    def __hash__(self) -> int:
        return hash((RowByRow, self.source))
