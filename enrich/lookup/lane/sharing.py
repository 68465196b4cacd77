"""Keys a lane's chunks are asking now: a later chunk waits for their fill instead.

The lane keeps up to ``capacity`` rows in flight, so when a run starts with a cold cache
its first chunks are all probed before any answer is cached (13 chunks of 10,000 rows on
the Spark defaults), and a key they share (a hot key) was asked by each of them. With a
cache and integer keys, a chunk's keys that an earlier chunk still in flight is asking
are left to that chunk: the later one asks only its other keys, waits for the earlier
chunk's fill, then reads those keys from the cache (and asks any that did not get there:
a failed key, an uncached miss, an evicted entry). The earlier chunk is always
assembled first (chunks are handed out in order), so the wait costs the later chunk
nothing it would not have waited for anyway.

Only a join without a timeout and without retries shares keys (the Spark defaults):
there, a key's answer does not depend on which chunk asked it or when.

Used on the runtime loop thread only. Imports no pyspark.
"""

from __future__ import annotations

import asyncio

import numpy as np

from ..cache_ints import IntKeys

# Past this many keys noted, the notes of chunks no longer in flight are dropped.
_NOTES_BOUND = 1 << 20


class InFlight:
    """The integer keys asked by a lane's chunks not yet filled, by chunk."""

    __slots__ = ("_asking", "_fills", "_live", "_next")

    def __init__(self) -> None:
        self._asking = IntKeys()  # key -> the chunk asking it (its slot)
        self._fills: dict[int, asyncio.Future[None]] = {}
        self._live = np.zeros(1024, np.bool_)  # by chunk number: not filled yet
        self._next = 0

    def __len__(self) -> int:
        """Chunks in flight that asked keys and were not filled yet."""
        return len(self._fills)

    def asking(self, keys: np.ndarray) -> np.ndarray:
        """For each of ``keys`` (int64), the chunk in flight asking it, or -1."""
        if not self._fills:
            return np.full(len(keys), -1, np.int64)
        chunks = self._asking.probe(keys, 0.0)
        return np.where(self._live[chunks], chunks, -1)  # -1 reads the last: never live

    def ask(self, keys: np.ndarray) -> int:
        """Note ``keys`` (int64, distinct) as asked by a new chunk; returns its number,
        for :meth:`filled`."""
        chunk = self._next
        self._next += 1
        if not self._fills:
            self._asking.clear()
        elif len(self._asking) > _NOTES_BOUND:
            self._asking.retain(self._live[self._asking.slots])
        if chunk + 1 >= len(self._live):  # the last place stays False (see asking)
            self._live = np.concatenate([self._live, np.zeros(len(self._live), np.bool_)])
        self._live[chunk] = True
        self._fills[chunk] = asyncio.get_running_loop().create_future()
        self._asking.put(keys, np.full(len(keys), chunk, np.int64), float("inf"))
        return chunk

    def filled(self, chunk: int) -> None:
        """``chunk``'s answers are in the cache, or will never be: its waiters go on."""
        self._live[chunk] = False
        fill = self._fills.pop(chunk, None)
        if fill is not None and not fill.done():
            fill.set_result(None)

    async def wait(self, chunks: np.ndarray) -> None:
        """Until each of ``chunks`` (-1 ignored) is filled. Cancelling the waiter does
        not cancel the fills."""
        fills = [self._fills[c] for c in set(chunks.tolist()) if c in self._fills]
        if fills:
            await asyncio.wait(fills)
