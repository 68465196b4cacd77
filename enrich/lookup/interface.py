"""The one face of the two lookup engines: chunks of keys in, one joined result per
chunk out (as httpcore's ``interfaces.py`` stands before ``http11`` and ``http2``).

Two engines implement it:

* the per-row engine (:class:`~enrich.lookup.per_row.row_engine.RowEngine`): the
  :class:`~enrich.lookup.per_row.lookup_join.LookupJoin` on the operator, for any key
  (composite keys, any source); a chunk's keys are Python values;
* the columnar lane (:class:`~enrich.lookup.lane.run.ColumnarLane`): Arrow keys of an
  integer or string type and a :class:`~enrich.lookup.contract.columnar_answer.ColumnarSource`;
  a chunk's keys stay an Arrow array.

Both give each row the same outcome, reason and count under the same settings (their
shared tests hold it), so a caller picks one for the keys it has
(:func:`~enrich.lookup.engines.engine_for`) and reads the results the same way: a
:class:`~enrich.lookup.outcome.JoinedChunk` (rows as Python values) or, from the lane, a
:class:`~enrich.lookup.outcome.ColumnarJoined` (one struct per row), both of which give
the same Arrow form (:class:`Joined`'s ``arrow``: an :class:`ArrowJoined`), so the
Spark worker and the SQL functions build their output one way whichever engine ran.
What the two share besides lives below them: the outcomes
(:mod:`enrich.lookup.outcome`), the cache's store and scope
(:mod:`enrich.lookup.cache.lookup_cache`), the source contract
(:mod:`enrich.lookup.contract`) and the settings (:mod:`enrich.lookup.join_settings`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from ..engine.records.call_metrics import JoinMetrics


@dataclass(slots=True)
class ArrowJoined:
    """A chunk's output rows in Arrow form.

    Attributes:
        tag: the chunk's tag, as given.
        selection: which input rows of the chunk the output rows come from, in order:
            int64 positions (a 1:N key's row repeats, a dropped row is absent), a boolean
            filter, or None for the first ``len(structs)`` rows as they are.
        structs: one dimension struct per output row (null: nothing joined).
        errors: the reason per output row (null: none), or None when the run carries no
            reasons.
    """

    tag: Any
    selection: pa.Array | None
    structs: pa.StructArray
    errors: pa.Array | None

    def input_rows(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of ``batch`` (the chunk's input) that the output rows come from."""
        selection = self.selection
        if selection is None:
            count = len(self.structs)
            return batch if count == batch.num_rows else batch.slice(0, count)
        if pa.types.is_boolean(selection.type):
            return batch.filter(selection)
        return batch.take(selection)

    def per_input_row(self, length: int) -> ArrowJoined:
        """One output row per input row of a chunk of ``length`` rows, in input order:
        a key with several rows gives its first, a dropped row a null struct."""
        selection = self.selection
        if selection is None and len(self.structs) == length:
            return self
        if selection is None:
            positions = np.arange(len(self.structs), dtype=np.int64)
        elif pa.types.is_boolean(selection.type):
            positions = np.flatnonzero(selection.to_numpy(zero_copy_only=False))
        else:
            positions = selection.to_numpy(zero_copy_only=False).astype(np.int64)
        first = np.ones(len(positions), dtype=bool)
        first[1:] = positions[1:] != positions[:-1]
        where = np.full(length, -1, dtype=np.int64)
        where[positions[first]] = np.flatnonzero(first)
        take = pa.array(where, mask=where < 0)
        errors = None if self.errors is None else self.errors.take(take)
        return ArrowJoined(self.tag, None, self.structs.take(take), errors)


def rows_joined(
    tag: Any,
    indices: list[int],
    rows: list[tuple[Any, ...] | None],
    errors: list[str | None] | None,
    struct_type: pa.StructType,
) -> ArrowJoined:
    """A :class:`~enrich.lookup.outcome.JoinedChunk`'s rows in Arrow form (its Python
    rows as ``struct_type`` structs)."""
    types = [field.type for field in struct_type]
    mask = None
    if None in rows:
        mask = pa.array([row is None for row in rows], type=pa.bool_())
        blank = (None,) * len(types)
        rows = [blank if row is None else row for row in rows]
    if rows:
        columns = [
            pa.array(values, type=kind)
            for values, kind in zip(zip(*rows, strict=True), types, strict=True)
        ]
    else:
        columns = [pa.array([], type=kind) for kind in types]
    structs = pa.StructArray.from_arrays(columns, fields=list(struct_type), mask=mask)
    in_order = indices == list(range(len(indices)))
    selection = None if in_order else pa.array(indices, type=pa.int64())
    reasons = None if errors is None else pa.array(errors, type=pa.string())
    return ArrowJoined(tag, selection, structs, reasons)


class Joined(Protocol):
    """One result of an engine: some or all of a chunk's output rows, with its tag.
    Both engines' results (:class:`~enrich.lookup.outcome.JoinedChunk`,
    :class:`~enrich.lookup.outcome.ColumnarJoined`) give the same Arrow form."""

    @property
    def tag(self) -> Any: ...

    def arrow(self, struct_type: pa.StructType) -> ArrowJoined:
        """The rows as Arrow: one ``struct_type`` struct per output row."""
        ...


class JoinRun(Protocol):
    """One run of an engine: the chunks' results, pulled in input order (ORDERED; under
    UNORDERED the per-row engine may hand a chunk's rows out in parts, each with its
    chunk's tag). ``close()`` cancels what is still in flight."""

    def __iter__(self) -> Iterator[Any]: ...

    def __next__(self) -> Any: ...

    def close(self) -> None: ...


class PushedRun(Protocol):
    """A run whose chunks are pushed (an Arrow table function's ``eval`` calls) rather
    than pulled: at most ``capacity`` rows in flight, results in input order."""

    def push(self, chunks: Iterable[tuple[Any, Any]]) -> Iterator[Joined]:
        """Start ``chunks`` (one pushed batch's); the results already answered."""
        ...

    def drain(self) -> Iterator[Joined]:
        """The results of every chunk still in flight, in order."""
        ...

    def close(self) -> None:
        """Cancel what is still in flight."""
        ...


@runtime_checkable
class JoinEngine(Protocol):
    """A lookup engine: joins chunks ``(tag, keys)`` with a source's rows.

    Promises of both engines: at most ``capacity`` rows in flight (admitted, not handed
    out); each row's timeout measures the store (its calls and retries' waits, never a
    wait for capacity, a connection, a permit or a load: see
    :mod:`enrich.engine.mailbox.hold`); null keys join nothing and ask nothing; misses
    follow ``how``, errors ``on_error``; every row is counted in :meth:`statistics` (in,
    out, misses, null keys, errors, cache hits, requests).
    """

    def chunk_keys(self, columns: Sequence[pa.Array]) -> Any:
        """A chunk's keys in this engine's form, from its key ``columns`` (one, or
        several for a composite key)."""
        ...

    def run(self, chunks: Iterable[tuple[Any, Any]]) -> JoinRun:
        """Start joining ``chunks`` (pulled lazily); their results, one or more a chunk."""
        ...

    def pushed(self) -> PushedRun:
        """A run whose chunks are pushed to it (see :class:`PushedRun`)."""
        ...

    def statistics(self) -> JoinMetrics:
        """What the engine did so far, over all its runs (a copy)."""
        ...


def joined_batches(
    engine: JoinEngine,
    batches: Iterable[pa.RecordBatch],
    on: Sequence[int],
    chunk_rows: int,
    struct_type: pa.StructType,
) -> Generator[tuple[pa.RecordBatch, ArrowJoined], None, None]:
    """``batches`` joined by ``engine``: each cut into chunks of at most ``chunk_rows``
    rows (their key columns at positions ``on``), fed lazily (so at most the engine's
    capacity in flight), and per result, as soon as it comes back, the input rows its
    output rows come from and its :class:`ArrowJoined` (``struct_type`` structs).

    No chunk (only empty batches): nothing is yielded and the engine never runs. Closing
    the iterator cancels what is still in flight."""

    feed = chunked(engine, batches, on, chunk_rows)
    first = next(feed, None)
    if first is None:
        return
    run = engine.run(_prepend(first, feed))
    try:
        for joined in run:
            arrow = joined.arrow(struct_type)
            yield arrow.input_rows(joined.tag), arrow
    finally:
        run.close()


def chunked(
    engine: JoinEngine, batches: Iterable[pa.RecordBatch], on: Sequence[int], chunk_rows: int
) -> Iterator[tuple[pa.RecordBatch, Any]]:
    """``batches`` cut into chunks ``(rows, keys)`` of at most ``chunk_rows`` rows, the
    keys (the columns at positions ``on``) in ``engine``'s form; an empty batch gives
    none."""
    for batch in batches:
        for start in range(0, batch.num_rows, chunk_rows):
            piece = batch.slice(start, chunk_rows)
            yield piece, engine.chunk_keys([piece.column(i) for i in on])


def _prepend(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
