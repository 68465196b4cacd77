"""The columnar contract of a dimension store: Arrow keys in, Arrow columns out.

Beside ``lookup_many`` (a mapping of Python tuples), a source may implement
:class:`ColumnarSource`: ``lookup_arrow(keys, struct_type)`` answers distinct keys with a
:class:`ColumnarAnswer` aligned with them, so that a join can line its rows up with their
answers by ``take`` instead of building tuples row by row. Any source's mapping answer
converts to that form with :func:`answer_from_mapping`, which is what a columnar source
does for the values its bulk decoder leaves alone (1:N arrays, undecodable values).

A columnar source may also split its work in two with ``fetch_arrow``: the requests (on
the runtime loop) and a :data:`Decode` step run later on the caller's thread. The lane
of a Spark task uses it so that the loop thread only does I/O while the task thread,
which waits for the answers anyway, decodes them.

Imports no pyspark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

import pyarrow as pa

from ...engine.records.record_schema import Schema

Row = tuple[Any, ...]
# A fetched answer's decode step: no arguments, no loop state, callable on any thread.
Decode = Callable[[], "ColumnarAnswer"]


@dataclass(slots=True)
class ColumnarAnswer:
    """A store's answer for distinct keys, aligned with them.

    Attributes:
        rows: one struct per key: the key's row, or null when the key has no single
            row (a miss, an error, or several rows).
        errors: key position -> that key's own exception (the other keys stand).
        multi: key position -> the key's rows as tuples in schema order, when it has
            several (a 1:N join). Rare, so kept as Python objects.

    A key whose position is in neither mapping and whose struct is null is a miss.
    """

    rows: pa.StructArray
    errors: dict[int, BaseException] = field(default_factory=dict)
    multi: dict[int, list[Row]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def is_simple(self) -> bool:
        """Whether every key is one row or a miss (no error, no 1:N)."""
        return not self.errors and not self.multi


@runtime_checkable
class ColumnarSource(Protocol):
    """A dimension store with a columnar lookup (see the module docstring).

    ``lookup_arrow(keys, struct_type)`` receives distinct, non-null keys as an Arrow
    array and returns a :class:`ColumnarAnswer` of the same length whose ``rows`` have
    ``struct_type``. It raises, like ``lookup_many``, when the call fails as a whole.
    Its per-key outcomes equal those of ``lookup_many`` for the same keys and values.

    A source whose ``splits_requests`` attribute is true bounds its own requests (a
    RedisLookup sends MGETs of its ``max_batch``): the lane then gives it all the keys
    of an attempt in one call, instead of calls of the join's ``max_batch``.

    A source may add ``async fetch_arrow(keys, struct_type) -> Decode``: the same lookup
    with the decoding left out. It makes the requests, keeps the raw replies, and
    returns a :data:`Decode` that builds the answer ``lookup_arrow`` would have returned
    (or raises what it would have raised); the decode step reads no loop state, so it
    may run on another thread. The lane then decodes on the task thread: a bulk decoder
    that releases the GIL (Arrow's JSON reader) would otherwise wait on the loop thread
    for up to the interpreter's switch interval to get it back (measured 0.9 ms per 500
    values alone, 6.4 ms beside a busy task thread), delaying every request behind it.
    """

    schema: Schema

    async def lookup_arrow(self, keys: pa.Array, struct_type: pa.StructType) -> ColumnarAnswer:
        """Look up distinct keys; the answer is aligned with ``keys``."""
        ...


def rows_to_struct(rows: Sequence[Row | None], struct_type: pa.StructType) -> pa.StructArray:
    """A struct array of ``struct_type`` from row tuples (None gives a null struct)."""
    if not rows:
        return pa.array([], type=struct_type)
    if None in rows:
        blank = (None,) * struct_type.num_fields
        mask = pa.array([r is None for r in rows], type=pa.bool_())
        return tuples_to_struct([blank if r is None else r for r in rows], struct_type, mask)
    return tuples_to_struct(cast("Sequence[Row]", rows), struct_type)


def tuples_to_struct(
    rows: Sequence[Row], struct_type: pa.StructType, mask: pa.Array | None = None
) -> pa.StructArray:
    """A struct array of ``struct_type`` from row tuples (no None among them), one
    ``pa.array`` per field; ``mask`` marks null structs."""
    fields = list(struct_type)
    if not rows:
        return pa.array([], type=struct_type)
    if not fields:
        return pa.StructArray.from_arrays([], fields=[], mask=mask)  # pragma: no cover
    arrays = [
        pa.array(values, type=f.type)
        for values, f in zip(zip(*rows, strict=True), fields, strict=True)
    ]
    return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)


def answer_from_mapping(
    keys: Sequence[Any], found: Mapping[Any, Any], struct_type: pa.StructType
) -> ColumnarAnswer:
    """The columnar form of a ``lookup_many`` answer for ``keys`` (per-key Python: for
    sources without a bulk decoder, and for the values a bulk decoder cannot take).

    Raises:
        TypeError: an answer is not a tuple, a list, None or an exception.
    """
    rows: list[Row | None] = []
    errors: dict[int, BaseException] = {}
    multi: dict[int, list[Row]] = {}
    for position, key in enumerate(keys):
        answer = found.get(key)
        row: Row | None = None
        if type(answer) is tuple:
            row = answer
        elif isinstance(answer, BaseException):
            errors[position] = answer
        elif isinstance(answer, list):
            if answer:
                multi[position] = answer
        elif answer is not None:
            raise TypeError(
                f"a lookup source answered {answer!r}: expected a tuple, a list or None"
            )
        rows.append(row)
    return ColumnarAnswer(rows_to_struct(rows, struct_type), errors, multi)


def concat_answers(parts: Sequence[ColumnarAnswer], struct_type: pa.StructType) -> ColumnarAnswer:
    """The answers of consecutive key slices as one answer."""
    if len(parts) == 1:
        return parts[0]
    errors: dict[int, BaseException] = {}
    multi: dict[int, list[Row]] = {}
    offset = 0
    for part in parts:
        errors.update((offset + i, e) for i, e in part.errors.items())
        multi.update((offset + i, m) for i, m in part.multi.items())
        offset += len(part)
    if not parts:
        return ColumnarAnswer(pa.array([], type=struct_type))
    rows = pa.concat_arrays([p.rows for p in parts])
    return ColumnarAnswer(rows, errors, multi)


def struct_rows(rows: pa.StructArray) -> list[Row | None]:
    """The structs as tuples in field order (None for a null struct): per-row Python,
    for the per-row path only."""
    names = [f.name for f in rows.type]
    return [None if d is None else tuple(d[n] for n in names) for d in rows.to_pylist()]


def struct_tuples(rows: pa.StructArray) -> list[Row]:
    """The structs as tuples in field order, a null struct's fields as None: one
    ``to_pylist`` per field and a ``zip``, no Python step per row (measured 4-5x cheaper
    than :func:`struct_rows`). Callers tell null structs apart by ``rows.is_valid()``."""
    columns = [column.to_pylist() for column in rows.flatten()]
    if not columns:  # pragma: no cover - a dimension has fields
        return [()] * len(rows)
    return list(zip(*columns, strict=True))
