"""The lookup cache's recency, kept lazily: uses noted now, applied when the order is needed.

A hit or a put only notes its key (a list append); the entries of a
:class:`~enrich.lookup.cache.store.CacheStore` are put in least-recently-used order from
those notes when the order is needed (an eviction, ``entries()``), each key moved once,
by its last use. The entries then leave in exactly the order eager moves would give,
but a store that never evicts never pays for a move, and one that does pays one move
per distinct key between evictions instead of one per use (measured: ``move_to_end`` of
10,000 hits on a 100,000-entry store cost 5.4 ms, more than half the bulk probe).

Imports no pyspark.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from itertools import compress
from typing import Any


class Recency:
    """The uses of an ordered map's keys noted since its order was last brought up to date.

    Plain and synchronous, used on the runtime loop thread only, as its store. The
    notes stay bounded by :meth:`note` and :meth:`note_many` (see :meth:`_bound`)."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        # Keys used (hit or put) since the order was last applied, oldest first.
        self.used: list[Any] = []

    def __len__(self) -> int:
        return len(self.used)

    def note(self, key: Any, entries: OrderedDict[Any, Any]) -> None:
        """``key`` of ``entries`` was used now."""
        self.used.append(key)
        self._bound(entries)

    def note_many(self, keys: Iterable[Any], entries: OrderedDict[Any, Any]) -> None:
        """``keys`` of ``entries`` were used now, in this order."""
        self.used.extend(keys)
        self._bound(entries)

    def apply(self, entries: OrderedDict[Any, Any]) -> None:
        """Apply the noted uses: each key still in ``entries`` moves to the end once, by
        its last use, so the entries stand in least-recently-used order."""
        used = self.used
        if not used:
            return
        self.used = []
        last = list(dict.fromkeys(reversed(used)))
        last.reverse()
        present = compress(last, map(entries.__contains__, last))
        deque(map(entries.move_to_end, present), maxlen=0)

    def clear(self) -> None:
        self.used = []

    def _bound(self, entries: OrderedDict[Any, Any]) -> None:
        """Keep the noted uses bounded: past four times the entries, only the last use
        of each key is kept, and only of keys still in ``entries`` if that is not enough
        (the order they give is the same)."""
        used = self.used
        if len(used) > 4 * len(entries) + 4096:
            last = list(dict.fromkeys(reversed(used)))
            last.reverse()
            if len(last) > 2 * len(entries) + 4096:
                last = list(compress(last, map(entries.__contains__, last)))
            self.used = last
