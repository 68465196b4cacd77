"""The storage of a lookup cache in one process: entries by key, bounded by rows and time.

A :class:`CacheStore` is read and filled key by key (``get``, ``put``: the per-row join)
or a chunk's distinct keys at a time (``get_many``, ``put_many``: the columnar lane).
Both kinds share one store per source scope and keep the same outcomes and counters;
the bulk methods run as C-level passes over the keys (``map`` of the dict's own
methods, ``itertools.compress``; evictions too), with a Python step only to delete an
entry found expired. Recency is kept lazily (:mod:`enrich.lookup.cache.recency`).

An entry holds the rows as the per-row join uses them (tuples), or, when the columnar
lane filled it, the position of its row in the store's :attr:`CacheStore.slab` (Arrow
columns the lane takes hits from with one ``take``; see :mod:`enrich.lookup.lane.cache_probe`);
``get`` turns such a position into the row's tuple, so both kinds read what the other
wrote.

The settings (:class:`~enrich.lookup.cache.lookup_cache.LookupCache`) make the store, once per
process and scope. Imports no pyspark.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import is_, is_not, itemgetter, le
from typing import Any, Protocol

import numpy as np

from .ints import IntKeys
from .recency import Recency

# What a cached miss holds, to tell it apart from an absent key.
MISS: Any = object()

# What get_many reads for an absent key: never expired, no rows.
_ABSENT = (float("inf"), None)
_expiry = itemgetter(0)
_rows = itemgetter(1)


class CachePolicy(Protocol):
    """What a store reads of its settings (a
    :class:`~enrich.lookup.cache.lookup_cache.LookupCache`)."""

    @property
    def max_rows(self) -> int | None: ...
    @property
    def ttl(self) -> float | None: ...
    @property
    def ttl_missing(self) -> float | None: ...
    @property
    def cache_missing(self) -> bool: ...


class RowSlab(Protocol):
    """Rows kept outside the entries (the lane's Arrow columns), by position."""

    def row(self, position: int) -> tuple[Any, ...]:
        """The row at ``position`` as the per-row join's tuple."""
        ...

    def valid(self, positions: np.ndarray) -> list[bool]:
        """Whether each row at ``positions`` is a row (False: a null row, a miss)."""
        ...


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


class CacheStore:
    """The entries of one cache in one process: an LRU map key -> (expiry, rows)."""

    __slots__ = (
        "_entries",
        "_evictions",
        "_expires",
        "_hits",
        "_load_failures",
        "_loads",
        "_misses",
        "_recency",
        "_recent",
        "ints",
        "settings",
        "slab",
    )

    def __init__(self, settings: CachePolicy) -> None:
        self.settings = settings
        # In least-recently-used order once the uses noted in _recency are applied.
        self._entries: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._recency = Recency()
        # Whether recency matters (entries can leave by size) and entries can expire.
        self._recent = settings.max_rows is not None
        self._expires = settings.ttl is not None or settings.ttl_missing is not None
        # Where the lane keeps the rows of the entries it filled (an int entry is a
        # position in it), or None.
        self.slab: RowSlab | None = None
        # The lane's integer keys whose rows are in the slab, probed in bulk (see
        # ints_usable); held here or in _entries, never in both.
        self.ints = IntKeys(settings.max_rows or 0)
        self._hits = self._misses = self._loads = self._load_failures = self._evictions = 0

    def __len__(self) -> int:
        return len(self._entries) + len(self.ints)

    # -- integer keys in bulk (the columnar lane) ------------------------------------------

    def ints_usable(self) -> bool:
        """Whether integer keys may be probed and filled in bulk: the store holds no
        entry of another kind (its first entries were the lane's integer keys)."""
        return not self._entries

    def probe_ints(self, keys: np.ndarray, now: float) -> np.ndarray:
        """:meth:`get_many` for integer ``keys`` (distinct, int64) while
        :meth:`ints_usable`: each key's slot in :attr:`slab`, -1 where absent or
        expired (a slot's null row is a cached miss)."""
        slots = self.ints.probe(keys, now)
        found = int(np.count_nonzero(slots >= 0))
        self._hits += found
        self._misses += len(keys) - found
        return slots

    def put_ints(self, keys: np.ndarray, slots: np.ndarray, found: np.ndarray, now: float) -> None:
        """:meth:`put_many` for integer ``keys`` (distinct, int64) while
        :meth:`ints_usable`: each key's row is at its slot in :attr:`slab`, a miss
        where ``found`` is False."""
        settings = self.settings
        ttl = settings.ttl
        expires: Any = now + ttl if ttl is not None else float("inf")
        if not settings.cache_missing:
            keys, slots = keys[found], slots[found]
        elif settings.ttl_missing is not None and settings.ttl_missing != ttl:
            expires = np.where(found, expires, now + settings.ttl_missing)
        self.ints.put(keys, slots, expires)
        self._loads += len(keys)
        if settings.max_rows is not None:
            self._evictions += self.ints.evict(settings.max_rows)

    def _to_entries(self) -> None:
        """Move the integer keys into the entries, least recently used first (a null
        row becomes :data:`MISS`), before the entries are used key by key."""
        ints = self.ints
        if not len(ints):
            return
        order = ints.by_use()
        slots = ints.slots[order]
        values: list[Any] = slots.tolist()
        if self.slab is not None:
            valid = self.slab.valid(slots)
            values = [value if ok else MISS for value, ok in zip(values, valid, strict=True)]
        pairs = zip(ints.expires[order].tolist(), values, strict=True)
        self._entries.update(zip(ints.keys[order].tolist(), pairs, strict=True))
        ints.clear()

    # -- key by key, and a chunk's keys as Python values ------------------------------------

    def get(self, key: Any, now: float, *, accept_miss: bool = True) -> Any:
        """The cached rows for ``key``, :data:`MISS` for a cached miss, None if absent.

        With ``accept_miss=False`` a cached miss counts as absent (for retries)."""
        if self.ints:
            self._to_entries()
        found = self._entries.get(key)
        if found is not None:
            expires, rows = found
            if expires > now and (accept_miss or rows is not MISS):
                if self._recent:
                    self._recency.note(key, self._entries)
                self._hits += 1
                if type(rows) is int and self.slab is not None:  # a row the lane filled
                    return self.slab.row(rows)
                return rows
            if expires <= now:
                del self._entries[key]
        self._misses += 1
        return None

    def put(self, key: Any, rows: Any, now: float) -> None:
        """Cache ``rows`` (a tuple, a non-empty list of tuples, or :data:`MISS`)."""
        if self.ints:
            self._to_entries()
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
        self._loads += 1
        limit = settings.max_rows
        if limit is None:  # nothing leaves by size: recency does not matter
            return
        if len(entries) > limit:
            self._recency.used.append(key)
            self._recency.apply(entries)
            while len(entries) > limit:
                entries.popitem(last=False)
                self._evictions += 1
        else:
            self._recency.note(key, entries)

    def get_many(self, keys: Sequence[Any], now: float) -> list[Any]:
        """What :meth:`get` answers for each of ``keys`` (distinct), in bulk: the cached
        rows, :data:`MISS`, or None where absent or expired; a row the lane filled is
        its position in :attr:`slab` (an int) instead of its tuple.

        Outcomes, counters and recency are those of calling ``get(key, now)`` for each
        key in order; an expired entry is deleted, as ``get`` deletes it. A retry never
        comes here (it would need ``accept_miss=False``)."""
        if self.ints:
            self._to_entries()
        entries = self._entries
        if not self._expires:  # one pass: no expiry to read
            found: list[tuple[float, Any]] = []
            values = list(map(_rows, map(entries.get, keys, repeat(_ABSENT))))
        else:
            found = list(map(entries.get, keys, repeat(_ABSENT)))
            values = list(map(_rows, found))
        if found and min(map(_expiry, found)) <= now:
            # Some entries expired (rare per probe): one C-level pass finds them, then
            # each is deleted, as get() would.
            for position in compress(count(), map(le, map(_expiry, found), repeat(now))):
                del entries[keys[position]]
                values[position] = None
        absent = values.count(None)
        if not self._recent:
            pass
        elif absent == 0:  # note the hits' use, in key order
            self._recency.note_many(keys, entries)
        elif absent < len(values):
            self._recency.note_many(compress(keys, map(is_not, values, repeat(None))), entries)
        self._hits += len(values) - absent
        self._misses += absent
        return values

    def put_many(self, keys: Sequence[Any], rows: Sequence[Any], now: float) -> None:
        """``put(key, rows, now)`` for each key and its rows, in order, in bulk (keys
        distinct). The entries, their order and the counters are those of the puts one
        by one, except that a key both evicted and put again by the same call counts
        one eviction instead of two (the entries kept are the same)."""
        if self.ints:
            self._to_entries()
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
        entries.update(zip(keys, pairs, strict=True))
        self._loads += len(keys)
        limit = settings.max_rows
        if limit is None:  # nothing leaves by size: recency does not matter
            return
        if len(entries) > limit:
            self._recency.used.extend(keys)
            self._recency.apply(entries)
            excess = len(entries) - limit
            deque(map(entries.popitem, repeat(False, excess)), maxlen=0)
            self._evictions += excess
        else:
            self._recency.note_many(keys, entries)

    def entries(self) -> list[tuple[Any, tuple[float, Any]]]:
        """The entries ``(key, (expiry, rows))``, least recently used first (without
        ``max_rows``, where nothing leaves by size, in the order they were first put)."""
        self._to_entries()
        self._recency.apply(self._entries)
        return list(self._entries.items())

    def slots(self) -> list[tuple[Any, int]]:
        """The entries whose rows are in :attr:`slab`: ``(key, position)``, in no
        particular order."""
        return [(key, rows) for key, (_, rows) in self._entries.items() if type(rows) is int]

    def move_slots(self, keys: Sequence[Any], positions: Sequence[int]) -> None:
        """Point the entries of ``keys`` (rows in :attr:`slab`) at new ``positions``,
        keeping their expiry and recency (the slab was compacted)."""
        entries = self._entries
        for key, position in zip(keys, positions, strict=True):
            entries[key] = (entries[key][0], position)  # an existing key keeps its place

    def failed(self, count: int = 1) -> None:
        """``count`` lookups failed (their failures are not cached)."""
        self._load_failures += count

    def clear(self) -> None:
        self._entries.clear()
        self._recency.clear()
        self.ints.clear()

    def statistics(self) -> CacheStatistics:
        return CacheStatistics(
            hits=self._hits,
            misses=self._misses,
            loads=self._loads,
            load_failures=self._load_failures,
            evictions=self._evictions,
            size=len(self),
        )
