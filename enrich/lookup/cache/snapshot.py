"""A full cache's snapshot: the whole dimension in Arrow columns, found by key in bulk.

A :class:`Snapshot` is immutable once built: the single-row answers as one Arrow struct
array, a :class:`KeyIndex` from each store key to its row there, and the rare other
answers (a 1:N key's rows, a key's own decode error) in a small dict. A lookup of a
chunk's keys is one bulk probe of the index and one ``take``.

A load (:func:`load_snapshot`) reads the pages the source's ``scan_dimension`` yields
into a :class:`SnapshotBuilder`. A page is either Arrow (a table whose first column holds
the store keys, unique across the scan, and whose other columns are the schema's fields:
a relational table read by ``COPY``, for instance) or a ``{store key: answer}`` mapping.
Arrow pages are kept as they come and concatenated once at the end, so the bulk of a
load never becomes Python objects; integer keys go into a NumPy index (direct address
for keys as dense as ids, else :class:`~enrich.lookup.cache.ints.IntKeys`), other keys
into a dict. Imports no pyspark.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...engine.clock import Clock
from ..contract.columnar_answer import ColumnarAnswer, tuples_to_struct
from ..contract.lookup_source import ListableSource
from .full import DimensionTooLarge, FullCache
from .ints import IntKeys

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Integer keys spanning at most this many values per key are indexed by direct address.
_DENSE = 4


class KeyIndex:
    """Store keys -> their row's position (each key once).

    Integer keys are found in C: keys spanning a range at most :data:`_DENSE` times
    their number (ids, as a table's keys mostly are) by direct address, one int32 slot
    per value of the range; sparser ones in an :class:`IntKeys` hash table. Other keys
    (text, bytes, composite) are held in a dict.
    """

    __slots__ = ("_dense", "_ints", "_low", "_map", "_size")

    def __init__(self, keys: pa.Array | Sequence[Any]) -> None:
        self._dense: np.ndarray | None = None
        self._low = 0
        self._ints: IntKeys | None = None
        self._map: dict[Any, int] = {}
        self._size = len(keys)
        if isinstance(keys, pa.Array) and pa.types.is_integer(keys.type) and keys.null_count == 0:
            self._index_ints(_int64s(keys))
            return
        listed = keys.to_pylist() if isinstance(keys, pa.Array) else keys
        self._map = dict(zip(listed, range(len(listed)), strict=True))

    def _index_ints(self, values: np.ndarray) -> None:
        places = np.arange(len(values), dtype=np.int64)
        if len(values):
            low, high = int(values.min()), int(values.max())
            if high - low < _DENSE * len(values) and len(values) < 2**31:
                self._low = low
                self._dense = np.full(high - low + 1, -1, np.int32)
                self._dense[values - low] = places
                return
        self._ints = IntKeys(expected=len(values))
        self._ints.put(values, places, np.inf)

    def __len__(self) -> int:
        return self._size

    def nbytes(self) -> int:
        """About the bytes the index holds (a dict's keys themselves not counted)."""
        if self._dense is not None:
            return int(self._dense.nbytes)
        if self._ints is not None:
            return self._ints.nbytes()
        return sys.getsizeof(self._map)

    def positions(self, store_keys: Sequence[Any]) -> np.ndarray:
        """Each key's row (int64), -1 where absent (a key that is None never matches)."""
        if self._dense is None and self._ints is None:
            found = self._map.get
            return np.fromiter(
                (-1 if (at := found(key)) is None else at for key in store_keys),
                np.int64,
                len(store_keys),
            )
        if set(map(type, store_keys)) <= {int}:  # no str, float or bool read as a number
            try:
                return self._find(np.fromiter(store_keys, np.int64, len(store_keys)))
            except OverflowError:
                pass
        fits = [type(k) is int and _INT64_MIN <= k <= _INT64_MAX for k in store_keys]
        values = np.fromiter(
            (k if ok else 0 for k, ok in zip(store_keys, fits, strict=True)), np.int64, len(fits)
        )
        places = self._find(values)
        places[~np.array(fits, np.bool_)] = -1  # a key that is no int64: a miss
        return places

    def _find(self, values: np.ndarray) -> np.ndarray:
        dense = self._dense
        if dense is None:
            assert self._ints is not None
            return self._ints.find(values)
        at = values - self._low  # wraps for keys far out of range: caught by the bound
        inside = (values >= self._low) & (at >= 0) & (at < len(dense))
        places = np.full(len(values), -1, np.int64)
        places[inside] = dense[at[inside]]
        return places


def _int64s(keys: pa.Array) -> np.ndarray:
    """An integer array without nulls as int64 NumPy values, read from its buffer
    (``to_numpy`` would import pandas: a second of a worker's first load)."""
    if keys.type != pa.int64():
        keys = pc.cast(keys, pa.int64())
    values: np.ndarray = np.frombuffer(
        keys.buffers()[1], np.int64, count=len(keys), offset=keys.offset * 8
    )
    return values


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One loaded dimension (immutable).

    Attributes:
        version: 1 for a process's first load, then one more per reload.
        loaded_at: clock time the load ended.
        index: store key -> its row in ``structs`` (single-row keys).
        structs: the single rows, as the source's struct type.
        others: store key -> its 1:N rows or its exception.
        size: bytes read for it.
    """

    version: int
    loaded_at: float
    index: KeyIndex
    structs: pa.StructArray
    others: dict[Any, Any]
    size: int

    @property
    def rows(self) -> int:
        """Keys held (single-row keys and the others)."""
        return len(self.index) + len(self.others)

    def nbytes(self) -> int:
        """About the bytes the snapshot holds: its Arrow rows and its key index (the
        rare other answers, Python objects, not counted)."""
        return int(self.structs.nbytes) + self.index.nbytes()

    def answers(self, store_keys: Sequence[Any]) -> list[Any]:
        """Each key's answer as ``lookup_many`` gives it: a row tuple, a list of rows, an
        exception, or None (absent: a miss)."""
        positions = self.index.positions(store_keys)
        found = positions >= 0
        answers: list[Any] = [None] * len(store_keys)
        if found.any():
            taken = self.structs.take(pa.array(positions[found]))
            columns = [taken.field(i).to_pylist() for i in range(taken.type.num_fields)]
            places = np.flatnonzero(found).tolist()
            rows = zip(*columns, strict=True) if columns else [()] * len(places)
            for at, row in zip(places, rows, strict=True):
                answers[at] = row
        if self.others:
            for at, key in enumerate(store_keys):
                if answers[at] is None and (other := self.others.get(key)) is not None:
                    answers[at] = other
        return answers

    def answer_arrow(self, store_keys: Sequence[Any], struct_type: pa.StructType) -> ColumnarAnswer:
        """The answer for ``store_keys`` (None: a key that fit no store key, a miss)."""
        if struct_type != self.structs.type:
            raise TypeError(f"snapshot holds {self.structs.type}, asked for {struct_type}")
        positions = self.index.positions(store_keys)
        rows = self.structs.take(pa.array(positions, mask=positions < 0))
        answer = ColumnarAnswer(rows)
        if self.others:
            for position, key in enumerate(store_keys):
                other = self.others.get(key)
                if other is None:
                    continue
                if isinstance(other, BaseException):
                    answer.errors[position] = other
                else:
                    answer.multi[position] = other
        return answer


class SnapshotBuilder:
    """The pages of one load, gathered within the settings' bounds, then built into a
    :class:`Snapshot` (:meth:`build`: CPU work, to run off the loop thread).

    A scan yields Arrow pages or mapping pages (one kind, as a rule; both are taken).
    """

    def __init__(self, source: ListableSource, settings: FullCache, struct_type: pa.StructType):
        self.source = source
        self.settings = settings
        self.struct_type = struct_type
        self.tables: list[pa.Table] = []
        self.answers: dict[Any, Any] = {}
        self.arrow_rows = 0
        self.size = 0

    def add(self, page: Any, size: int) -> None:
        """Take one page of the scan and its bytes read.

        Raises:
            DimensionTooLarge: more than ``max_rows`` keys or ``max_bytes`` bytes so far.
        """
        self.size += size
        if isinstance(page, (pa.Table, pa.RecordBatch)):
            table = pa.Table.from_batches([page]) if isinstance(page, pa.RecordBatch) else page
            self.tables.append(table)
            self.arrow_rows += table.num_rows
        else:
            self._add_mapping(page)
        self._check()

    def _add_mapping(self, page: Mapping[Any, Any]) -> None:
        answers = self.answers
        for key, answer in page.items():
            if answer is None or (type(answer) is list and not answer):
                answers.pop(key, None)  # a miss holds nothing (a key deleted mid-scan)
            else:
                answers[key] = answer

    def _check(self) -> None:
        settings, keys = self.settings, self.arrow_rows + len(self.answers)
        if keys > settings.max_rows:
            raise DimensionTooLarge(
                f"full cache of {self.source!r}: the dimension has more than max_rows="
                f"{settings.max_rows} keys; raise max_rows or use a LookupCache"
            )
        if settings.max_bytes is not None and self.size > settings.max_bytes:
            raise DimensionTooLarge(
                f"full cache of {self.source!r}: the dimension is larger than max_bytes="
                f"{settings.max_bytes} ({self.size} bytes read so far, {keys} keys); "
                "raise max_bytes or use a LookupCache"
            )

    def build(self, version: int, at: float) -> Snapshot:
        """The snapshot of the pages taken."""
        struct_type = self.struct_type
        singles = [key for key, answer in self.answers.items() if type(answer) is tuple]
        others = {key: answer for key, answer in self.answers.items() if type(answer) is not tuple}
        parts: list[pa.StructArray] = []
        keys: pa.Array | list[Any] = singles
        if self.tables:
            arrow_keys, structs = _columns(self.tables, struct_type)
            parts.append(structs)
            keys = arrow_keys.to_pylist() + singles if singles else arrow_keys
        if singles or not parts:
            parts.append(tuples_to_struct([self.answers[key] for key in singles], struct_type))
        structs = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        return Snapshot(version, at, KeyIndex(keys), structs, others, self.size)


def _columns(tables: list[pa.Table], struct_type: pa.StructType) -> tuple[pa.Array, pa.StructArray]:
    """The keys and the rows of Arrow pages, each one contiguous array."""
    fields = list(struct_type)
    width = tables[0].num_columns - len(fields)
    if width != 1:
        raise ValueError(
            f"an Arrow page of a dimension holds one key column and {len(fields)} fields, "
            f"got {tables[0].num_columns} columns"
        )

    def whole(i: int) -> pa.Array:
        chunks = [chunk for table in tables for chunk in table.column(i).chunks]
        return pa.chunked_array(chunks, tables[0].schema.field(i).type).combine_chunks()

    columns = []
    for i, field in enumerate(fields, start=width):
        column = whole(i)
        columns.append(column if column.type == field.type else pc.cast(column, field.type))
    return whole(0), pa.StructArray.from_arrays(columns, fields=fields)


async def load_snapshot(
    source: ListableSource,
    settings: FullCache,
    struct_type: pa.StructType,
    version: int,
    clock: Clock,
) -> Snapshot:
    """Read the whole dimension into a new snapshot, within the settings' bounds.

    Raises:
        DimensionTooLarge: more than ``max_rows`` keys or ``max_bytes`` bytes.
        Exception: whatever the source raised (the load is abandoned).
    """
    builder = SnapshotBuilder(source, settings, struct_type)
    async for page, page_bytes in source.scan_dimension(settings.page_rows):
        builder.add(page, page_bytes)
    # Building the index and the struct array is CPU work: keep it off the loop thread.
    snapshot = await asyncio.to_thread(builder.build, version, 0.0)
    return replace(snapshot, loaded_at=clock.now())
