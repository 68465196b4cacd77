"""The source a join with a :class:`~enrich.FullCache` asks: the snapshot, no network.

:class:`FullCacheSource` wraps the user's source (which must be a
:class:`~enrich.lookup.contract.lookup_source.ListableSource`) and answers ``lookup_many`` and
``lookup_arrow`` from this process's snapshot: a key in it gets its row(s) (or its
stored decode error, as a live lookup would), a key absent from it is a miss, and no
request is made. A join given ``cache=FullCache(...)`` swaps its source for this one
(:func:`with_full_cache`), so the per-row join, the columnar lane and the SQL function
all read the snapshot the same way. Imports no pyspark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from ..._errors import LookupFailed
from ...engine.clock import Clock, LoopClock
from ...engine.records.arrow_types import arrow_schema
from ...engine.records.record_schema import Schema
from ...engine.runtime import pop_process_local, process_local
from ..contract.columnar_answer import ColumnarAnswer, ColumnarSource, answer_from_mapping
from ..contract.lookup_source import ListableSource, LookupSource
from .dimension import Dimension
from .full import FullCache, FullCacheStatistics
from .lookup_cache import cache_scope


class FullCacheSource:
    """``source`` answered from a whole-dimension snapshot per process (see the module).

    Args:
        source: the dimension store; it must list its dimension (``RedisLookup``).
        cache: the full cache's settings.
        clock: the time of reload schedules (default: the running loop's).
        wall: epoch seconds now, for ``reload_at`` (default ``time.time``).

    Picklable (the clock and wall are not sent: an executor uses its loop's).
    """

    # The snapshot answers any number of keys at once: the lane sends them in one call.
    splits_requests = True

    def __init__(
        self,
        source: LookupSource,
        cache: FullCache,
        *,
        clock: Clock | None = None,
        wall: Callable[[], float] | None = None,
    ) -> None:
        if not isinstance(source, ListableSource):
            raise ValueError(
                f"FullCache needs a source that can list its whole dimension (store_key "
                f"and scan_dimension, as RedisLookup has), got {source!r}"
            )
        self.source = source
        self.cache = cache
        self.schema: Schema = source.schema
        self._clock = clock
        self._wall = wall

    def __getstate__(self) -> dict[str, Any]:
        return {"source": self.source, "cache": self.cache, "schema": self.schema}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _clock=None, _wall=None)

    def _key(self) -> tuple[str, str, Any]:
        return ("enrich.full_cache", self.cache.token, cache_scope(self.source))

    def dimension(self) -> Dimension:
        """This process's state of the cache (made on first use, on the running loop)."""
        loop = asyncio.get_running_loop()
        key = self._key()
        dimension = process_local(key, self._new_dimension)
        if dimension.loop is not loop:  # a new loop (tests): its timers are gone with it
            pop_process_local(key)
            dimension = process_local(key, self._new_dimension)
        return dimension

    def _new_dimension(self) -> Dimension:
        clock = self._clock or LoopClock(asyncio.get_running_loop())
        struct_type = pa.struct(list(arrow_schema(self.schema)))
        listable: ListableSource = self.source
        return Dimension(listable, self.cache, struct_type, clock, self._wall)

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Each key's answer in the snapshot, None where absent (under "lazy", before
        the first snapshot is in: the store's answer)."""
        snapshot = await self.dimension().current()
        if snapshot is None:
            return await self.source.lookup_many(keys)
        store_key = self.source.store_key
        store_keys: list[Any] = []
        bad: dict[Any, Any] = {}
        for key in keys:
            try:
                store_keys.append(store_key(key))
            except (TypeError, ValueError) as exc:
                store_keys.append(None)
                bad[key] = self._bad_key(key, exc)
        found = dict(zip(keys, snapshot.answers(store_keys), strict=True))
        found.update(bad)
        return found

    async def lookup_arrow(self, keys: pa.Array, struct_type: pa.StructType) -> ColumnarAnswer:
        """``lookup_many`` in columnar form: the snapshot's rows taken by position."""
        snapshot = await self.dimension().current()
        if snapshot is None:
            if isinstance(self.source, ColumnarSource):
                return await self.source.lookup_arrow(keys, struct_type)
            values = keys.to_pylist()
            return answer_from_mapping(values, await self.source.lookup_many(values), struct_type)
        values = keys.to_pylist()
        store_key = self.source.store_key
        bad: dict[int, BaseException] = {}
        try:
            store_keys = list(map(store_key, values))
        except (TypeError, ValueError):  # rare: find the keys that do not fit, one by one
            store_keys = []
            for position, key in enumerate(values):
                try:
                    store_keys.append(store_key(key))
                except (TypeError, ValueError) as exc:
                    store_keys.append(None)
                    bad[position] = self._bad_key(key, exc)
        if struct_type != snapshot.structs.type:  # a caller with its own field types
            return answer_from_mapping(values, await self.lookup_many(values), struct_type)
        answer = snapshot.answer_arrow(store_keys, struct_type)
        answer.errors.update(bad)
        return answer

    def _bad_key(self, key: Any, exc: BaseException) -> LookupFailed:
        message = f"key {key!r} does not fit the store's keys ({exc})"
        return LookupFailed(message, key=key, kind="key", retryable=False)

    def statistics(self) -> FullCacheStatistics | None:
        """This process's statistics of the cache (None: not used in this process, or
        used on another loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        key = self._key()
        dimension = pop_process_local(key)
        if dimension is None:
            return None
        process_local(key, lambda: dimension)  # put back
        if loop is not None and dimension.loop is not loop:
            return None
        statistics: FullCacheStatistics = dimension.statistics()
        return statistics

    async def reload(self) -> None:
        """Load the dimension again now, and wait for the load to end (it may fail:
        see :meth:`statistics`)."""
        dimension = self.dimension()
        dimension.reload()
        await dimension.wait_loaded()

    async def aclose(self) -> None:
        """Drop this process's snapshot and stop reloading; close the source."""
        dimension = pop_process_local(self._key())
        if dimension is not None:
            dimension.close()
        await self.source.aclose()

    def __repr__(self) -> str:
        return f"FullCacheSource({self.source!r}, {self.cache!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FullCacheSource):
            return NotImplemented
        return self.source == other.source and self.cache.token == other.cache.token

    def __hash__(self) -> int:
        return hash((cache_scope(self.source), self.cache.token))


def with_full_cache(source: Any, cache: Any, clock: Clock | None = None) -> Any:
    """``source`` wrapped in a :class:`FullCacheSource` when ``cache`` is a
    :class:`~enrich.FullCache` (idempotent); ``source`` itself otherwise."""
    if isinstance(cache, FullCache) and not isinstance(source, FullCacheSource):
        return FullCacheSource(source, cache, clock=clock)
    return source
