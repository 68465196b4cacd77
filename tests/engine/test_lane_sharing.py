"""Chunks in flight share their keys (enrich/lookup/lane/sharing.py): with a cache and
integer keys, a key an earlier chunk is asking is not asked again; the later chunk
waits for that chunk's fill and reads the key from the cache, or asks it when it did
not get there."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from enrich import LookupCache, LookupFailed
from enrich.engine.runtime import get_loop
from enrich.lookup.lane.columnar import Decode
from enrich.lookup.lane.run import ColumnarJoined, ColumnarLane
from enrich.lookup.metrics import JoinMetrics
from enrich.testing import DeferredColumnarFakeSource

pytestmark = pytest.mark.timeout(60)

STRUCT = pa.struct([("value", pa.string())])
DATA: dict[int, Any] = {1: ("one",), 2: ("two",), 4: ("four",), 5: ("five",)}  # 3: a miss
CHUNKS = [[1, 2, 3, 1], [2, 3, 2], [3, 4, 1, None], [5, 1]]


class HeldSource(DeferredColumnarFakeSource):
    """Holds every call until ``release`` is set on the loop, so that every chunk is
    admitted, probed and asking before any answer comes back (a cold start)."""

    def __init__(self, data: dict[int, Any]) -> None:
        super().__init__(data)
        self.release = asyncio.Event()
        self.calls: list[list[int]] = []

    async def fetch_arrow(self, keys: Any, struct_type: Any) -> Decode:
        self.calls.append(keys.to_pylist())
        await self.release.wait()
        return await super().fetch_arrow(keys, struct_type)


def held_chunks(source: HeldSource, keys: list[list[int | None]]) -> Iterator[tuple[int, pa.Array]]:
    """The chunks, then the release, scheduled on the loop after every chunk's
    resolution was handed to it (the loop runs them first, in order)."""
    for tag, chunk in enumerate(keys):
        yield tag, pa.array(chunk, pa.int64())
    get_loop().call_soon_threadsafe(source.release.set)


def lane(source: Any, **settings: Any) -> ColumnarLane:
    options: dict[str, Any] = {
        "how": "left",
        "on_error": "error_column",
        "cache": LookupCache(max_rows=100),
        "timeout": None,
        "capacity": 1_000,
        "max_batch": 2,
    }
    options.update(settings)
    return ColumnarLane(source, STRUCT, metrics=JoinMetrics(), **options)


def values(chunk: list[int | None]) -> list[Any]:
    return [None if k is None or k not in DATA else {"value": DATA[k][0]} for k in chunk]


def test_a_key_asked_by_a_chunk_in_flight_is_not_asked_again() -> None:
    source = HeldSource(DATA)
    run = lane(source)
    out = list(run.run(held_chunks(source, CHUNKS)))
    assert [j.structs.to_pylist() for j in out if isinstance(j, ColumnarJoined)] == [
        values(chunk) for chunk in CHUNKS
    ]
    assert sorted(source.keys_requested) == [1, 2, 3, 4, 5]  # each key once
    # Chunk 1 asked nothing: its keys were chunk 0's (read from the cache after its fill).
    assert source.calls == [[1, 2], [3], [4], [5]]
    distinct = sum(len({k for k in chunk if k is not None}) for chunk in CHUNKS)
    assert (run.metrics.cache_misses, run.metrics.cache_hits) == (5, distinct - 5)


def test_without_a_cache_or_with_a_timeout_every_chunk_asks_its_keys() -> None:
    for settings in ({"cache": None}, {"timeout": 30.0}):
        source = HeldSource(DATA)
        out = list(lane(source, **settings).run(held_chunks(source, CHUNKS)))
        assert [j.structs.to_pylist() for j in out if isinstance(j, ColumnarJoined)] == [
            values(chunk) for chunk in CHUNKS
        ]
        asked = [k for chunk in CHUNKS for k in dict.fromkeys(chunk) if k is not None]
        assert sorted(source.keys_requested) == sorted(asked), settings


def test_a_shared_key_that_failed_is_asked_again_by_the_chunk_that_waited() -> None:
    data = dict(DATA)
    data[2] = LookupFailed("scripted", kind="status:500", retryable=False)
    source = HeldSource(data)
    run = lane(source)
    out = list(run.run(held_chunks(source, CHUNKS)))
    # 2 failed for chunk 0 (not cached), so chunk 1 asked it after waiting, and failed.
    assert source.keys_requested.count(2) == 2
    assert sorted(k for k in source.keys_requested if k != 2) == [1, 3, 4, 5]
    first, second = out[0], out[1]
    assert not isinstance(first, ColumnarJoined) and not isinstance(second, ColumnarJoined)
    assert first.errors is not None and second.errors is not None
    assert sum(e is not None for e in first.errors) == 1
    assert sum(e is not None for e in second.errors) == 2  # both of its rows of key 2
    joined = [j.structs.to_pylist() for j in out[2:] if isinstance(j, ColumnarJoined)]
    assert joined == [values(CHUNKS[2]), values(CHUNKS[3])]
