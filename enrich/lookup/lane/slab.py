"""Where the lane's cache keeps the rows it filled: an Arrow struct column, by position.

An :class:`ArrowSlab` is appended to by every fill and read by every probe. Joining
each fill's rows to the column before the next read copied the whole column per fill
(measured: 0.23 ms for 100,000 rows, on every chunk with a miss), although most probes
read no row of the last fills. So the rows live in two columns: a large ``rows`` and a
small ``recent`` that fills are joined into; a read that needs a row of ``recent``
joins it to ``rows`` first, as does ``recent`` reaching an eighth of ``rows``. A probe
that reads only older rows costs no copy of the column.

Imports no pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..contract.columnar_answer import struct_tuples

if TYPE_CHECKING:
    from ..cache.store import CacheStore

# ``recent`` joins ``rows`` once it holds more than this share of it (plus MERGE_ROWS).
MERGE_SHARE = 8
MERGE_ROWS = 4_096


class ArrowSlab:
    """The rows the lane cached in one store, by position (see the module docstring).

    Used on the runtime loop thread only, as the store. The columns it hands out are
    Arrow arrays, immutable: later appends and compactions make new ones, so a probe
    may take from a column it got on another thread."""

    __slots__ = ("_length", "_pending", "_recent", "_rows", "struct_type")

    def __init__(self, struct_type: pa.StructType) -> None:
        self.struct_type = struct_type
        self._rows: pa.StructArray = pa.array([], type=struct_type)
        self._recent: pa.StructArray = self._rows
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

    def column(self, needed: int | None = None) -> pa.StructArray:
        """A column holding the rows at the positions below ``needed`` (all of them
        when None), each at its position."""
        recent = self._recent
        if self._pending:
            recent = pa.concat_arrays([recent, *self._pending])
            self._pending = []
        rows = self._rows
        if len(recent) and (
            needed is None
            or needed > len(rows)
            or len(recent) * MERGE_SHARE > len(rows) + MERGE_ROWS
        ):
            rows = self._rows = pa.concat_arrays([rows, recent])
            recent = recent.slice(0, 0)
        self._recent = recent
        return rows

    def take(self, positions: list[int]) -> pa.StructArray:
        """The rows at ``positions``."""
        return self.column().take(pa.array(positions, pa.int64()))

    def row(self, position: int) -> tuple[Any, ...]:
        """The row at ``position`` as the per-row join's tuple."""
        return struct_tuples(self.column(position + 1).slice(position, 1))[0]

    def valid(self, positions: np.ndarray) -> list[bool]:
        """Whether each row at ``positions`` is a row (False: a null row, a miss)."""
        column = self.column()
        valid: list[bool] = column.is_valid().take(pa.array(positions, pa.int64())).to_pylist()
        return valid

    def compact(self, store: CacheStore) -> None:
        """Keep only the rows ``store``'s entries point at, and point them anew."""
        ints = store.ints
        if len(ints):  # the lane's integer keys (then the store holds no other entry)
            self._rows = self.column().take(pa.array(ints.slots, pa.int64()))
            self._recent = self._rows.slice(0, 0)
            self._length = len(self._rows)
            ints.move(np.arange(self._length, dtype=np.int64))
            return
        live = store.slots()
        keys = [key for key, _ in live]
        self._rows = self.take([position for _, position in live])
        self._recent = self._rows.slice(0, 0)
        self._length = len(self._rows)
        store.move_slots(keys, range(len(keys)))
