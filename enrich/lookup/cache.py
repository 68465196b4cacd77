"""The per-process lookup cache: bounded by rows and by time, misses cached apart.

A :class:`LookupCache` is a picklable description; its storage lives once per process
(see ``enrich.process_local``), so every task of an executor shares it, and it starts
empty in a new worker. All access happens on the runtime loop thread.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from ..engine.checks import check_int, check_seconds
from ..engine.runtime import process_local

# What a cached miss holds, to tell it apart from an absent key.
MISS: Any = object()


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
    of a miss always asks the store again: a cached miss never answers a retry.
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

    def failed(self) -> None:
        self._load_failures += 1

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
