"""The columnar lane's cache: a chunk's distinct keys probed, filled and merged in bulk.

The lane and the per-row join share one :class:`~enrich.lookup.cache.CacheStore` per
source scope. The per-row join reads and fills it key by key; the lane does a chunk's
distinct keys at once, with the store's bulk methods (``get_many``, ``put_many``), and
keeps the same outcomes and counters: a hit is the key's rows or a cached miss; a key
not cached (or expired) is asked; a fetched row, 1:N rows or miss is cached with its
own TTL; a failed key is counted and not cached; retries never read the cache.

The rows the lane fetches stay Arrow: a fill appends the fetched struct column to the
store's :class:`ArrowSlab` and the entries hold each row's position in it, so a probe's
hits are one ``take`` (measured on 10,000 hits: 0.4 ms, against 7.9 ms to build them
from tuples with one ``pa.array`` per field, which was 40% of a warm cached join).
Entries the per-row join filled hold tuples, and the lane builds those hits from them;
the per-row join reads a slab row as its tuple (``CacheStore.get``).

Memory stays bounded by ``max_rows``: an evicted or replaced entry leaves a dead row in
the slab, and once the slab holds more than twice the entries (plus
:data:`SLAB_SLACK` rows) it is compacted, its live rows taken into a new one and their
entries pointed at them. A probe takes its hits when it runs, so a compaction while a
chunk's requests are out changes nothing for that chunk.

What is bulk: the keys come out of Arrow with one ``to_pylist``; the store answers them
with C-level passes; the keys to ask are one ``filter`` of the Arrow keys; the answer
is fetched rows and hit rows put in key order by one ``take`` (the inverse permutation
is a ``sort_indices``), or the hits themselves when every key was one.

Imports no pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import getitem, is_, is_not
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..cache import MISS, CacheStore
from .columnar import ColumnarAnswer, struct_tuples, tuples_to_struct

# Dead rows a slab may hold beyond its store's entries before it is compacted.
SLAB_SLACK = 65_536


class ArrowSlab:
    """The rows the lane cached in one store, as one Arrow struct column, by position.

    Appends are kept apart and joined to the column when it is next read, so a run of
    fills costs one concatenation. Used on the runtime loop thread only, as the store.
    """

    __slots__ = ("_length", "_pending", "_rows", "struct_type")

    def __init__(self, struct_type: pa.StructType) -> None:
        self.struct_type = struct_type
        self._rows: pa.StructArray = pa.array([], type=struct_type)
        self._pending: list[pa.StructArray] = []
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def append(self, rows: pa.StructArray) -> int:
        """Keep ``rows``; returns the position of the first."""
        base = self._length
        self._pending.append(rows)
        self._length += len(rows)
        return base

    def take(self, positions: list[int]) -> pa.StructArray:
        """The rows at ``positions``."""
        return self._column().take(pa.array(positions, pa.int64()))

    def row(self, position: int) -> tuple[Any, ...]:
        """The row at ``position`` as the per-row join's tuple."""
        return struct_tuples(self._column().slice(position, 1))[0]

    def compact(self, store: CacheStore) -> None:
        """Keep only the rows ``store``'s entries point at, and point them anew."""
        live = store.slots()
        keys = [key for key, _ in live]
        self._rows = self.take([position for _, position in live])
        self._length = len(self._rows)
        store.move_slots(keys, range(len(keys)))

    def _column(self) -> pa.StructArray:
        if self._pending:
            self._rows = pa.concat_arrays([self._rows, *self._pending])
            self._pending = []
        return self._rows


def slab_of(store: CacheStore, struct_type: pa.StructType) -> ArrowSlab | None:
    """``store``'s slab for rows of ``struct_type`` (made on first use), or None when
    the store keeps rows of another type (then the lane caches tuples)."""
    slab = store.slab
    if slab is None:
        slab = store.slab = ArrowSlab(struct_type)
    if isinstance(slab, ArrowSlab) and slab.struct_type == struct_type:
        return slab
    return None


@dataclass(slots=True)
class CacheProbe:
    """What the cache held for a chunk's distinct keys when the chunk was admitted.

    Attributes:
        keys: the distinct keys as Python values.
        ask_positions: the positions of the keys to ask, ascending.
        ask: those keys, as Arrow (the distinct keys themselves when none was cached).
        hit_positions: the positions of the keys the cache answered.
        hit_rows: their rows, aligned with ``hit_positions`` (null: a cached miss or
            a cached 1:N key).
        multi: key position -> cached 1:N rows.
        aligned: whether every key was a hit and ``hit_rows`` are in key order.
    """

    keys: list[Any]
    ask_positions: list[int]
    ask: pa.Array
    hit_positions: list[int] = field(default_factory=list)
    hit_rows: pa.StructArray | None = None
    multi: dict[int, Any] = field(default_factory=dict)
    aligned: bool = False

    @classmethod
    def of(
        cls, store: CacheStore, distinct: pa.Array, now: float, struct_type: pa.StructType
    ) -> CacheProbe:
        """Probe ``store`` for ``distinct`` (distinct, non-null keys) at ``now``; the
        hits' rows are taken now (see the module docstring)."""
        keys = distinct.to_pylist()
        values = store.get_many(keys, now)
        absent = list(map(is_, values, repeat(None)))
        ask_positions = list(compress(range(len(keys)), absent))
        if len(ask_positions) == len(keys):
            return cls(keys, ask_positions, distinct)
        if not ask_positions:
            ask = distinct.slice(0, 0)
        else:
            ask = distinct.filter(pa.array(absent, pa.bool_()))
        probe = cls(keys, ask_positions, ask)
        probe._take_hits(store, values, struct_type)
        return probe

    def _take_hits(self, store: CacheStore, values: list[Any], struct_type: pa.StructType) -> None:
        slab = store.slab if isinstance(store.slab, ArrowSlab) else None
        if slab is not None and slab.struct_type != struct_type:
            slab = None
        kinds = list(map(type, values))
        if slab is not None and not self.ask_positions and kinds.count(int) == len(values):
            # The common warm case: every key is a row the lane filled.
            self.hit_positions = list(range(len(values)))
            self.hit_rows = slab.take(values)
            self.aligned = True
            return
        present = list(map(is_not, values, repeat(None)))
        positions = list(compress(range(len(values)), present))
        hits = list(compress(values, present))
        kinds = list(compress(kinds, present))
        pieces: list[pa.StructArray] = []
        ordered: list[int] = []
        is_slot = list(map(is_, kinds, repeat(int)))
        if slab is not None and any(is_slot):
            ordered += compress(positions, is_slot)
            pieces.append(slab.take(list(compress(hits, is_slot))))
        else:  # no slab of this type: a position cannot be an entry here
            is_slot = [False] * len(hits)
        is_row = list(map(is_, kinds, repeat(tuple)))
        if any(is_row):
            ordered += compress(positions, is_row)
            pieces.append(tuples_to_struct(list(compress(hits, is_row)), struct_type))
        other = [not (slot or row) for slot, row in zip(is_slot, is_row, strict=True)]
        if any(other):  # cached misses and cached 1:N keys: a null struct each
            other_positions = list(compress(positions, other))
            others = list(compress(hits, other))
            ordered += other_positions
            pieces.append(pa.nulls(len(other_positions), struct_type))
            is_multi = list(map(is_not, others, repeat(MISS)))
            self.multi.update(
                zip(compress(other_positions, is_multi), compress(others, is_multi), strict=True)
            )
        self.hit_positions = ordered
        self.hit_rows = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)

    @property
    def hits(self) -> int:
        """How many keys the cache answered."""
        return len(self.keys) - len(self.ask_positions)

    def fill(self, store: CacheStore, fetched: ColumnarAnswer | None, now: float) -> None:
        """Cache the answer of the asked keys (aligned with :attr:`ask`), as the per-row
        join caches each key's: its row, its 1:N rows, or a miss; a failed key is
        counted as a load failure and left out."""
        if fetched is None or not self.ask_positions:
            return
        keys = list(map(self.keys.__getitem__, self.ask_positions))
        slab = slab_of(store, fetched.rows.type)
        if slab is None:
            values = cacheable(fetched)
        else:
            if len(slab) > 2 * len(store) + SLAB_SLACK:
                slab.compact(store)
            values = slab_entries(fetched, slab.append(fetched.rows))
        if fetched.errors:
            kept = [position not in fetched.errors for position in range(len(keys))]
            keys = list(compress(keys, kept))
            values = list(compress(values, kept))
            store.failed(len(fetched.errors))
        store.put_many(keys, values, now)

    def merge(self, fetched: ColumnarAnswer | None, struct_type: pa.StructType) -> ColumnarAnswer:
        """The answer for every distinct key, in order: the fetched answer for the
        asked keys (aligned with :attr:`ask`), the cached rows for the others."""
        hit_rows = self.hit_rows
        if hit_rows is None:  # nothing cached: the fetched answer is aligned already
            return fetched if fetched is not None else ColumnarAnswer(pa.nulls(0, struct_type))
        if self.aligned:
            return ColumnarAnswer(hit_rows)
        multi = dict(self.multi)
        ask = self.ask_positions
        pieces = [hit_rows]
        errors: dict[int, BaseException] = {}
        if fetched is not None and ask:
            pieces.insert(0, fetched.rows)
            errors = {ask[i]: error for i, error in fetched.errors.items()}
            multi.update((ask[i], many) for i, many in fetched.multi.items())
        # The pieces hold the keys in the order ask, hits; sorting that order gives,
        # for each key, its row in the pieces.
        order = pc.sort_indices(pa.array(ask + self.hit_positions, pa.int64()))
        return ColumnarAnswer(pa.concat_arrays(pieces).take(order), errors, multi)


def slab_entries(answer: ColumnarAnswer, base: int) -> list[Any]:
    """Each key's entry when the answer's rows sit in a slab from ``base`` on: its
    row's position, its rows (a list, for 1:N) or ``MISS`` (failed keys too)."""
    rows = answer.rows
    values: list[Any] = list(range(base, base + len(rows)))
    if rows.null_count:  # null structs are misses: pick (MISS, position)[valid] per key
        valid = rows.is_valid().to_pylist()
        values = list(map(getitem, zip(repeat(MISS), values), valid))
    for position, many in answer.multi.items():
        values[position] = many
    return values


def cacheable(answer: ColumnarAnswer) -> list[Any]:
    """Each key's answer as the per-row join caches it: its row (a tuple), its rows (a
    list, for 1:N) or ``MISS``; a failed key's entry is ``MISS`` too (callers leave it
    out)."""
    rows = answer.rows
    values: list[Any] = struct_tuples(rows)
    if rows.null_count:  # null structs are misses: pick (MISS, row)[valid] per key
        valid = rows.is_valid().to_pylist()
        values = list(map(getitem, zip(repeat(MISS), values), valid))
    for position, many in answer.multi.items():
        values[position] = many
    return values
