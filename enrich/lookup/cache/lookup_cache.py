"""The per-process lookup cache's settings: bounded by rows and by time, misses cached apart.

A :class:`LookupCache` is a picklable description; its storage (a
:class:`~enrich.lookup.cache.store.CacheStore`) lives once per process (see
``enrich.process_local``), so every task of an executor shares it, and it starts empty
in a new worker. All access happens on the runtime loop thread.

The store, its counters and the marker of a cached miss are re-exported here, where the
rest of the library imports them from.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from ...engine.checks import check_int, check_seconds
from ...engine.runtime import process_local
from .store import (
    MISS as MISS,
    CacheStatistics as CacheStatistics,
    CacheStore as CacheStore,
    RowSlab as RowSlab,
)


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
    key, the second a chunk's distinct keys at a time (see :mod:`enrich.lookup.cache.store`).
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


def cache_scope(source: Any) -> Hashable:
    """What tells one source from another for a shared cache: its settings (the source
    itself when it hashes, else its repr), with its class. The per-row join, the
    columnar lane and the full cache of one source meet in one store through it."""
    try:
        hash(source)
        return (type(source).__qualname__, source)
    except TypeError:
        return (type(source).__qualname__, repr(source))
