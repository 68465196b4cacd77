"""The columnar lane of a lookup join: Arrow keys in, dimension structs out by ``take``.

Its floor of the house: the lane's run (:mod:`.run`: chunks admitted, requests
pipelined, answers aligned), the loop's side of a chunk (:mod:`.resolve`: cache probe,
calls, retries, fills), its calls to a source (:mod:`.calls`), the columnar source
contract and answer (:mod:`.columnar`), the bulk decoders sources use (:mod:`.bulk`),
the cache probe, fill and merge (:mod:`.cache`; integer keys in bulk, as NumPy columns
of the store, :mod:`enrich.lookup.cache.ints`), its entries as Arrow (:mod:`.entries`),
the Arrow rows it keeps
(:mod:`.slab`) and per-key retries (:mod:`.retry`).
The per-row join it stands beside is the rest of :mod:`enrich.lookup`.

Internal: import the public names from :mod:`enrich`.
"""

from __future__ import annotations

from .run import (
    ColumnarJoined as ColumnarJoined,
    ColumnarLane as ColumnarLane,
    is_columnar_key as is_columnar_key,
)
