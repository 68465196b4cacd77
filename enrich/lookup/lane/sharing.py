"""Keys a lane's chunks are asking now: a later chunk waits for their fill instead.

The lane keeps up to ``capacity`` rows in flight, so when a run starts with a cold cache
its first chunks are all probed before any answer is cached (13 chunks of 10,000 rows on
the Spark defaults), and a key they share (a hot key) was asked by each of them. With a
cache and integer keys, a chunk marks the keys it asks in the store's table (a slot of
``-2 - chunk``, :meth:`~enrich.lookup.cache_store.CacheStore.mark_ints`), which its fill
then overwrites with the rows, as the fill of a key not marked would insert them. A
later chunk's probe finds such a mark in the same pass that finds the cached keys: it
asks only its other keys, waits for the marking chunk's fill, then reads those keys
from the cache (and asks any that did not get there: a failed key, an uncached miss,
an evicted entry). The earlier chunk is always assembled first (chunks are handed out in
order), so the wait costs the later chunk nothing it would not have waited for anyway.

Only a join without a timeout and without retries shares keys (the Spark defaults):
there, a key's answer does not depend on which chunk asked it or when. A mark of a
chunk that is not this lane's, or no longer in flight, reads as a key to ask.

Used on the runtime loop thread only. Imports no pyspark.
"""

from __future__ import annotations

import asyncio
import itertools

import numpy as np

# Chunk numbers, unique in the process: lanes sharing a store never read each other's.
_numbers = itertools.count()


def mark(chunk: int) -> int:
    """The slot that marks a key asked by ``chunk``."""
    return -2 - chunk


def marked(slots: np.ndarray) -> np.ndarray:
    """The chunk each of ``slots`` marks, or -1 (a row's slot, or absent)."""
    chunks: np.ndarray = np.where(slots <= -2, -2 - slots, -1)
    return chunks


class InFlight:
    """A lane's chunks that marked keys and were not filled yet."""

    __slots__ = ("_fills",)

    def __init__(self) -> None:
        self._fills: dict[int, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._fills)

    def live(self, chunks: np.ndarray) -> np.ndarray:
        """Which of ``chunks`` (-1: none) are this lane's, not filled yet."""
        if not self._fills:
            return np.zeros(len(chunks), np.bool_)
        live: np.ndarray = np.isin(chunks, np.fromiter(self._fills, np.int64, len(self._fills)))
        return live

    def start(self) -> int:
        """A new chunk that marks the keys it asks; returns its number."""
        chunk = next(_numbers)
        self._fills[chunk] = asyncio.get_running_loop().create_future()
        return chunk

    def filled(self, chunk: int) -> None:
        """``chunk``'s answers are in the cache, or will never be: its waiters go on."""
        fill = self._fills.pop(chunk, None)
        if fill is not None and not fill.done():
            fill.set_result(None)

    async def wait(self, chunks: np.ndarray) -> None:
        """Until each of ``chunks`` is filled. Cancelling the waiter does not cancel
        the fills."""
        fills = [self._fills[c] for c in set(chunks.tolist()) if c in self._fills]
        if fills:
            await asyncio.wait(fills)
