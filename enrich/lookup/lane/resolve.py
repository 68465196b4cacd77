"""The loop's side of the columnar lane: a chunk's distinct keys resolved, its fills made.

A :class:`ChunkResolver` runs on the runtime loop. For a chunk's distinct keys it probes
the cache (the store the per-row join of the same source uses), asks the source for the
keys the cache did not answer (:mod:`enrich.lookup.lane.source_calls`), and, with retries,
asks again per the per-row join's rules (:mod:`enrich.lookup.lane.key_retries`).

Without retries the fetched answer is handed over undecoded: the task thread decodes
it, takes the chunk's rows from it and the cache's hits in one ``take``, and hands the
decoded answer back (:meth:`ChunkResolver.fill`), which caches it at the time it runs.
A join with retries needs the decoded answer here (to see which keys to ask again): it
decodes, fills and merges on the loop.

Imports no pyspark.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa

from ...engine.retry import RetryStrategy
from ..cache.lookup_cache import LookupCache, cache_scope
from ..cache.store import CacheStore
from ..contract.columnar_answer import ColumnarAnswer, ColumnarSource
from .cache_probe import CacheProbe
from .key_retries import with_retries
from .source_calls import Budget, LaneCalls, Resolved


class ChunkResolver:
    """Resolves a lane's chunks on the loop (see the module docstring).

    Args:
        source: the lane's :class:`ColumnarSource`.
        struct_type: the Arrow struct of the dimension fields.
        calls: how the lane asks ``source``.
        cache / timeout / retry: the join's, as for ``LookupJoin``.
    """

    __slots__ = ("cache", "calls", "retry", "source", "struct_type", "timeout")

    def __init__(
        self,
        source: ColumnarSource,
        struct_type: pa.StructType,
        calls: LaneCalls,
        *,
        cache: LookupCache | None,
        timeout: float | None,
        retry: RetryStrategy | None,
    ) -> None:
        self.source = source
        self.struct_type = struct_type
        self.calls = calls
        self.cache = cache
        self.timeout = timeout
        self.retry = retry

    def store(self) -> CacheStore | None:
        """The store the per-row join of this source uses too, or None without a cache."""
        if self.cache is None:
            return None
        return self.cache.storage(cache_scope(self.source))

    async def resolve(self, distinct: pa.Array) -> Resolved:
        """What the cache and the source answer for ``distinct`` (distinct, non-null keys)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        calls = self.calls
        resolved = Resolved(ColumnarAnswer(pa.nulls(0, self.struct_type)))
        store = self.store()
        probe = None
        ask = distinct
        if store is not None and len(distinct):
            probe = CacheProbe.of(store, distinct, started, self.struct_type)
            resolved.cache_hits = probe.hits
            resolved.cache_misses = len(probe.ask_positions)
            ask = probe.ask
        fetched = None
        if probe is not None and not len(ask):
            # Every key cached: the task thread takes the chunk's rows from the hits
            # (CacheProbe.join_rows), one take instead of the hits' and then the rows'.
            resolved.probe = probe
            return resolved
        if len(ask):
            # Each key's timeout, spent only by its calls to the store and its retries'
            # waits (source_calls.Budget): the time the chunk waited to be admitted, or
            # waits for a connection, a permit or a load, never count.
            budget = None if self.timeout is None else Budget.full(len(ask), self.timeout)
            parts = await calls.attempt(ask, 1, budget, resolved)
            if self.retry is None:
                # Decoded by the task thread (module docstring), which also merges the
                # cache's hits and hands the fill back to this loop (fill).
                resolved.parts = parts
                resolved.probe = probe
                return resolved
            fetched = calls.settle(parts)

            async def again(keys: pa.Array, number: int, left: Budget | None) -> ColumnarAnswer:
                return calls.settle(await calls.attempt(keys, number, left, resolved))

            fetched, resolved.retries = await with_retries(again, ask, fetched, self.retry, budget)
        if store is not None and probe is not None:
            probe.fill(store, fetched, loop.time())
            resolved.answer = probe.merge(fetched, self.struct_type)
        elif fetched is not None:
            resolved.answer = fetched
        return resolved

    async def fill(self, probe: CacheProbe, fetched: ColumnarAnswer) -> None:
        """Cache a chunk's fetched answer (on the loop, at the time it runs)."""
        store = self.store()
        if store is None:  # pragma: no cover - a probe means a cache
            return
        probe.fill(store, fetched, asyncio.get_running_loop().time())
