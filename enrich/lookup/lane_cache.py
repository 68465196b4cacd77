"""The columnar lane's cache: a chunk's distinct keys probed, filled and merged in bulk.

The lane and the per-row join share one :class:`~enrich.lookup.cache.CacheStore` per
source scope. The per-row join reads and fills it key by key; the lane does a chunk's
distinct keys at once, with the store's bulk methods (``get_many``, ``put_many``), and
keeps the same outcomes and counters: a hit is the key's rows or a cached miss; a key
not cached (or expired) is asked; a fetched row, 1:N rows or miss is cached with its
own TTL; a failed key is counted and not cached; retries never read the cache.

What is bulk, and what is not:

* the probe: the keys come out of Arrow with one ``to_pylist``; the store answers them
  with C-level passes (see ``CacheStore.get_many``); the keys to ask are one
  ``filter`` of the Arrow keys;
* the fill: the fetched rows become tuples with one ``to_pylist`` per field and a
  ``zip`` (:func:`~enrich.lookup.columnar.struct_tuples`), null structs become misses
  by the validity mask, and ``put_many`` stores them; only 1:N keys and failed keys
  take a Python step each;
* the merge: hit tuples become Arrow with one ``pa.array`` per field, and the answer
  is fetched rows, hit rows and null rows (cached misses, cached 1:N keys) put in key
  order by one ``take`` (the inverse permutation is a ``sort_indices``).

Keeping Arrow slices in the cache instead of tuples was measured and left: a ``take``
of 7,000 hits from the slices of 143 fills cost 1.1 ms against 2.2 ms for building them
from tuples, but a slice pins its whole fill's buffers for as long as one of its rows
stays cached (``max_rows`` would no longer bound memory), and the per-row join, which
shares the store, would have to turn slices back into tuples one by one.

Imports no pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from operator import getitem, is_, is_not, not_
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .cache import MISS, CacheStore
from .columnar import ColumnarAnswer, struct_tuples, tuples_to_struct


@dataclass(slots=True)
class CacheProbe:
    """What the cache held for a chunk's distinct keys when the chunk was admitted.

    Attributes:
        keys: the distinct keys as Python values.
        values: per key, its cached rows (a tuple, a list of tuples, or ``MISS``), or
            None where the key is to be asked.
        ask_positions: the positions of the keys to ask, ascending.
        ask: those keys, as Arrow (the distinct keys themselves when none was cached).
    """

    keys: list[Any]
    values: list[Any]
    ask_positions: list[int]
    ask: pa.Array

    @classmethod
    def of(cls, store: CacheStore, distinct: pa.Array, now: float) -> CacheProbe:
        """Probe ``store`` for ``distinct`` (distinct, non-null keys) at ``now``."""
        keys = distinct.to_pylist()
        values = store.get_many(keys, now)
        absent = list(map(is_, values, repeat(None)))
        ask_positions = list(compress(range(len(keys)), absent))
        if len(ask_positions) == len(keys):
            ask = distinct
        elif not ask_positions:
            ask = distinct.slice(0, 0)
        else:
            ask = distinct.filter(pa.array(absent, pa.bool_()))
        return cls(keys, values, ask_positions, ask)

    @property
    def hits(self) -> int:
        """How many keys the cache answered."""
        return len(self.keys) - len(self.ask_positions)

    def fill(self, store: CacheStore, fetched: ColumnarAnswer | None, now: float) -> None:
        """Cache the answer of the asked keys (aligned with :attr:`ask`), as the per-row
        join caches each key's: its row, its 1:N rows, or a miss; a failed key is
        counted as a load failure and left out."""
        if fetched is None:
            return
        keys = list(map(self.keys.__getitem__, self.ask_positions))
        values = cacheable(fetched)
        if fetched.errors:
            kept = [position not in fetched.errors for position in range(len(keys))]
            keys = list(compress(keys, kept))
            values = list(compress(values, kept))
            store.failed(len(fetched.errors))
        store.put_many(keys, values, now)

    def merge(self, fetched: ColumnarAnswer | None, struct_type: pa.StructType) -> ColumnarAnswer:
        """The answer for every distinct key, in order: the fetched answer for the
        asked keys (aligned with :attr:`ask`), the cached rows for the others."""
        if not self.hits:  # nothing cached: the fetched answer is aligned already
            return fetched if fetched is not None else ColumnarAnswer(pa.nulls(0, struct_type))
        values = self.values
        cached = list(map(is_not, values, repeat(None)))
        hit_positions = list(compress(range(len(values)), cached))
        hit_values = list(compress(values, cached))
        is_row = list(map(isinstance, hit_values, repeat(tuple)))
        rows = list(compress(hit_values, is_row))
        pieces = [tuples_to_struct(rows, struct_type)]
        multi: dict[int, Any] = {}
        if len(rows) == len(hit_values):  # the common case: every hit is one row
            row_positions, other_positions = hit_positions, []
        else:  # cached misses and cached 1:N keys: a null struct each, 1:N rows aside
            row_positions = list(compress(hit_positions, is_row))
            not_row = list(map(not_, is_row))
            other_positions = list(compress(hit_positions, not_row))
            others = list(compress(hit_values, not_row))
            is_multi = list(map(is_not, others, repeat(MISS)))
            multi.update(
                zip(compress(other_positions, is_multi), compress(others, is_multi), strict=True)
            )
            pieces.append(pa.nulls(len(other_positions), struct_type))
        ask = self.ask_positions
        errors: dict[int, BaseException] = {}
        if fetched is not None and ask:
            pieces.insert(0, fetched.rows)
            errors = {ask[i]: error for i, error in fetched.errors.items()}
            multi.update((ask[i], many) for i, many in fetched.multi.items())
        # The pieces hold the keys in the order ask, row hits, other hits; sorting that
        # order gives, for each key, its row in the pieces.
        order = pc.sort_indices(pa.array(ask + row_positions + other_positions, pa.int64()))
        return ColumnarAnswer(pa.concat_arrays(pieces).take(order), errors, multi)


def cacheable(answer: ColumnarAnswer) -> list[Any]:
    """Each key's answer as the cache holds it: its row (a tuple), its rows (a list, for
    1:N) or ``MISS``; a failed key's entry is ``MISS`` too (callers leave it out)."""
    rows = answer.rows
    values: list[Any] = struct_tuples(rows)
    if rows.null_count:  # null structs are misses: pick (MISS, row)[valid] per key
        valid = rows.is_valid().to_pylist()
        values = list(map(getitem, zip(repeat(MISS), values), valid))
    for position, many in answer.multi.items():
        values[position] = many
    return values
