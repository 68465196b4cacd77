"""The columnar lookup engine: Arrow keys in, dimension structs out by ``take``.

Its rooms: the lane's run (:mod:`.run`: chunks admitted, requests pipelined, answers
aligned), the loop's side of a chunk (:mod:`.resolve`: cache probe, calls, retries,
fills), its calls to a source (:mod:`.source_calls`), the cache probe, fill and merge
(:mod:`.cache_probe`; integer keys in bulk, as NumPy columns of the store,
:mod:`enrich.lookup.cache.ints`), its entries as Arrow (:mod:`.entries`), the Arrow rows
it keeps (:mod:`.slab`) and per-key retries (:mod:`.key_retries`). The source contract
it reads (:mod:`enrich.lookup.contract`) and the outcomes it hands out
(:mod:`enrich.lookup.outcome`) lie below it, shared with the per-row engine
(:mod:`enrich.lookup.per_row`).

Internal: import the public names from :mod:`enrich`.
"""

from __future__ import annotations

from .run import (
    ColumnarLane as ColumnarLane,
    LaneChunk as LaneChunk,
    is_columnar_key as is_columnar_key,
)
