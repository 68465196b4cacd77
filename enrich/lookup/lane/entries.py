"""What the lane's cache entries hold, as Arrow and back: a fill's entries, a probe's slots.

A key the lane fills is cached as its row's position in the store's slab (an int), its
1:N rows (a list) or a miss; a probe reads the positions back as one int64 array. The
helpers here convert between those Python entries and Arrow in C-level passes; the
probe, fill and merge that use them are :mod:`enrich.lookup.lane.cache_probe`.

Imports no pyspark.
"""

from __future__ import annotations

from itertools import repeat
from operator import getitem
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..cache.store import MISS
from ..contract.columnar_answer import ColumnarAnswer, struct_tuples


def needed(slots: pa.Array) -> int:
    """The rows a column must hold for ``slots`` (int64, some valid)."""
    return int(pc.max(slots).as_py()) + 1


def slab_slots(hits: list[Any]) -> pa.Array | None:
    """``hits`` as an int64 array of slab positions, or None when one is not a position
    (a tuple, a list of rows, :data:`MISS`): one C-level conversion either way."""
    try:
        return pa.array(hits, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


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
