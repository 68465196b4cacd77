"""The per-process lookup cache: bounded by rows and by time, misses cached apart.

A :class:`LookupCache` is a picklable description; its storage lives once per process
(see ``enrich.process_local``), so every task of an executor shares it, and it starts
empty in a new worker. All access happens on the runtime loop thread.

A :class:`CacheStore` is read and filled key by key (``get``, ``put``: the per-row join)
or a chunk's distinct keys at a time (``get_many``, ``put_many``: the columnar lane).
Both kinds share one store per source scope and keep the same outcomes and counters;
the bulk methods run as C-level passes over the keys (``map`` of the dict's own
methods, ``itertools.compress``; evictions too), with a Python step only to delete an
entry found expired. On a large store their cost is mostly memory latency (each key's
entry, its LRU links, its rows), so they gain most on fills and small stores.

An entry holds the rows as the per-row join uses them (tuples), so both kinds read what
the other wrote; the lane turns hits into Arrow in bulk (one ``pa.array`` per field).
Why not Arrow slices in the entries: see :mod:`enrich.lookup.lane_cache`.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict, deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import is_, is_not, itemgetter, le
from typing import Any

from ..engine.checks import check_int, check_seconds
from ..engine.runtime import process_local

# What a cached miss holds, to tell it apart from an absent key.
MISS: Any = object()

# What get_many reads for an absent key: never expired, no rows.
_ABSENT = (float("inf"), None)
_expiry = itemgetter(0)
_rows = itemgetter(1)


@dataclass(frozen=True)
class CacheStatistics:
    """Counters of one cache (per process).

    Attributes:
        hits: lookups answered from the cache (a cached miss included).
        misses: lookups not found in the cache (absent or expired).
        loads: values put into the cache after a lookup.
        load_failures: lookups whose failure was not cached.
        evictions: entries dropped to stay within ``max_rows``.
        size: entries held now.
    """

    hits: int = 0
    misses: int = 0
    loads: int = 0
    load_failures: int = 0
    evictions: int = 0
    size: int = 0

    @property
    def hit_ratio(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass(frozen=True)
class LookupCache:
    """Settings of a per-process lookup cache; eviction is mandatory.

    Args:
        max_rows: entries kept at most; the least recently used leave first.
        ttl: seconds a found value stays valid (None: until evicted by size).
        ttl_missing: seconds a miss stays valid (default: ``ttl``).
        cache_missing: whether misses are cached at all.

    At least one of ``max_rows`` and ``ttl`` must bound the cache. A retry made because
    of a miss always asks the store again: a cached miss never answers a retry. The
    per-row join and the columnar lane of a source share its store: the first key by
    key, the second a chunk's distinct keys at a time (see the module docstring).
    """

    max_rows: int | None = 10_000
    ttl: float | None = None
    ttl_missing: float | None = None
    cache_missing: bool = True
    token: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_rows is None and self.ttl is None:
            raise ValueError("a LookupCache needs max_rows or ttl (or both): eviction is mandatory")
        if self.max_rows is not None:
            check_int("max_rows", self.max_rows, rule=">= 1 or None")
        check_seconds("ttl", self.ttl)
        check_seconds("ttl_missing", self.ttl_missing)

    def storage(self, scope: Hashable) -> CacheStore:
        """This process's store for this cache and ``scope`` (the source it caches)."""
        return process_local(("enrich.cache", self.token, scope), lambda: CacheStore(self))


class CacheStore:
    """The entries of one cache in one process: an LRU map key -> (expiry, rows)."""

    __slots__ = (
        "_entries",
        "_evictions",
        "_hits",
        "_load_failures",
        "_loads",
        "_misses",
        "settings",
    )

    def __init__(self, settings: LookupCache) -> None:
        self.settings = settings
        self._entries: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._hits = self._misses = self._loads = self._load_failures = self._evictions = 0

    def get(self, key: Any, now: float, *, accept_miss: bool = True) -> Any:
        """The cached rows for ``key``, :data:`MISS` for a cached miss, None if absent.

        With ``accept_miss=False`` a cached miss counts as absent (for retries)."""
        found = self._entries.get(key)
        if found is not None:
            expires, rows = found
            if expires > now and (accept_miss or rows is not MISS):
                self._entries.move_to_end(key)
                self._hits += 1
                return rows
            if expires <= now:
                del self._entries[key]
        self._misses += 1
        return None

    def put(self, key: Any, rows: Any, now: float) -> None:
        """Cache ``rows`` (a tuple, a non-empty list of tuples, or :data:`MISS`)."""
        settings = self.settings
        if rows is MISS:
            if not settings.cache_missing:
                return
            ttl = settings.ttl_missing if settings.ttl_missing is not None else settings.ttl
        else:
            ttl = settings.ttl
        expires = now + ttl if ttl is not None else float("inf")
        entries = self._entries
        entries[key] = (expires, rows)
        entries.move_to_end(key)
        self._loads += 1
        limit = settings.max_rows
        if limit is not None:
            while len(entries) > limit:
                entries.popitem(last=False)
                self._evictions += 1

    def get_many(self, keys: Sequence[Any], now: float) -> list[Any]:
        """What :meth:`get` answers for each of ``keys`` (distinct), in bulk: the cached
        rows, :data:`MISS`, or None where absent or expired.

        Outcomes, counters and recency are those of calling ``get(key, now)`` for each
        key in order; an expired entry is deleted, as ``get`` deletes it. A retry never
        comes here (it would need ``accept_miss=False``)."""
        entries = self._entries
        found = list(map(entries.get, keys, repeat(_ABSENT)))
        values = list(map(_rows, found))
        if found and min(map(_expiry, found)) <= now:
            # Some entries expired (rare per probe): one C-level pass finds them, then
            # each is deleted, as get() would.
            for position in compress(count(), map(le, map(_expiry, found), repeat(now))):
                del entries[keys[position]]
                values[position] = None
        absent = values.count(None)
        if absent < len(values):  # refresh the hits' recency, in key order
            hits = compress(keys, map(is_not, values, repeat(None)))
            deque(map(entries.move_to_end, hits), maxlen=0)
        self._hits += len(values) - absent
        self._misses += absent
        return values

    def put_many(self, keys: Sequence[Any], rows: Sequence[Any], now: float) -> None:
        """``put(key, rows, now)`` for each key and its rows, in order, in bulk (keys
        distinct). The entries, their order and the counters are those of the puts one
        by one, except that a key both evicted and put again by the same call counts
        one eviction instead of two (the entries kept are the same)."""
        settings = self.settings
        ttl = settings.ttl
        expires = now + ttl if ttl is not None else float("inf")
        if settings.cache_missing:
            ttl_missing = settings.ttl_missing if settings.ttl_missing is not None else ttl
            expires_missing = now + ttl_missing if ttl_missing is not None else float("inf")
        else:  # misses are not cached: leave them out
            found = list(map(is_not, rows, repeat(MISS)))
            keys = list(compress(keys, found))
            rows = list(compress(rows, found))
            expires_missing = expires
        if expires_missing == expires:
            pairs = zip(repeat(expires), rows, strict=False)
        else:  # each entry's expiry by its kind (a bool indexes the pair)
            kinds = map(is_, rows, repeat(MISS))
            pairs = zip(map((expires, expires_missing).__getitem__, kinds), rows, strict=True)
        entries = self._entries
        before = len(entries)
        entries.update(zip(keys, pairs, strict=True))
        if len(entries) - before != len(keys):  # some keys were cached: refresh them
            deque(map(entries.move_to_end, keys), maxlen=0)
        self._loads += len(keys)
        limit = settings.max_rows
        if limit is not None and len(entries) > limit:
            excess = len(entries) - limit
            deque(map(entries.popitem, repeat(False, excess)), maxlen=0)
            self._evictions += excess

    def failed(self, count: int = 1) -> None:
        """``count`` lookups failed (their failures are not cached)."""
        self._load_failures += count

    def clear(self) -> None:
        self._entries.clear()

    def statistics(self) -> CacheStatistics:
        return CacheStatistics(
            hits=self._hits,
            misses=self._misses,
            loads=self._loads,
            load_failures=self._load_failures,
            evictions=self._evictions,
            size=len(self._entries),
        )
