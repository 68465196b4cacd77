"""What a staging list holds of its source, so that the commit can skip each row's check.

Keyed by the source record (:mod:`~enrich.spark.sink.redis.by_source`), the commit script
reads each staged row's source stream and entry id and compares them with its stream's
mark before it applies the row (:mod:`~enrich.spark.sink.redis.two_phase.script`): about
2 us of Redis time a row of the ~5.5 a row the commit costs, serial after the tasks.

A task usually stages one source partition's rows in entry-id order (a Kafka task reads
one topic partition; the joins keep their input's order). Then one comparison says it
for the whole list: when its first entry id is after its stream's mark, so is every
row's, and the script applies the rows without reading them (it reads one row a step,
the last, to know how far the list has gone). :class:`SourceRange` follows the Arrow
batches a task stages and says so (:meth:`SourceRange.summary`): the stream and the
first entry id, as the script reads them, when every row is of that one stream and the
ids never go down; nothing otherwise (several streams, rows out of order, rows that are
not Arrow batches), and the script checks each row as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..sink_spi import ONE_STREAM, SourceFields


class SourceRange:
    """Follows one staging list's batches; :meth:`summary` says what they hold."""

    def __init__(self, source: SourceFields, names: list[str]) -> None:
        self._id = names.index(source.id)
        self._streams = [names.index(c) for c in source.partition]
        self._stream: str | None = None  # the one stream seen so far
        self._first: str | None = None  # the first row's entry id (text)
        self._last: tuple[int, int] | None = None  # the last row's id, as numbers
        self._mixed = False  # several streams, ids going down, or a row not in Arrow

    def follow(self, items: Iterator[Any]) -> Iterator[Any]:
        """``items`` as they are, each noted on its way."""
        for item in items:
            self._note(item)
            yield item

    def summary(self) -> str:
        """``[stream, first id]`` as JSON when every row is of one stream in entry-id
        order; "" otherwise (or when no row was staged)."""
        if self._mixed or self._first is None:
            return ""
        return json.dumps([self._stream, self._first])

    def _note(self, item: Any) -> None:
        if self._mixed:
            return
        if not isinstance(item, pa.RecordBatch):
            self._mixed = True
            return
        if item.num_rows:
            self._mixed = not self._ordered(item)

    def _ordered(self, batch: pa.RecordBatch) -> bool:
        """Notes ``batch``; whether the rows so far are still of one stream, in order
        (every row's source was checked before: ids valid, stream columns not null)."""
        import pyarrow.compute as pc  # here: the sinks' planner processes need none of it

        stream = ONE_STREAM
        if self._streams:
            texts = []
            for index in self._streams:
                column = pc.cast(batch.column(index), pa.string())
                if pc.count_distinct(column).as_py() != 1:
                    return False
                texts.append(column[0].as_py())
            stream = "/".join(texts)
        if self._stream is not None and stream != self._stream:
            return False
        ids = batch.column(self._id)
        if pa.types.is_integer(ids.type):
            ms = pc.cast(ids, pa.uint64())
            seq = None
        else:
            halves = pc.split_pattern(ids, "-", max_splits=1)
            try:
                ms = pc.cast(pc.list_element(halves, 0), pa.uint64())
                seq = pc.cast(pc.list_element(halves, 1), pa.uint64())
            except pa.ArrowInvalid:  # beyond 64 bits: compared row by row instead
                return False
        if not _rising(ms, seq):
            return False
        first = (ms[0].as_py(), 0 if seq is None else seq[0].as_py())
        if self._last is not None and first < self._last:
            return False
        if self._first is None:
            self._stream, self._first = stream, str(ids[0].as_py())
        self._last = (ms[-1].as_py(), 0 if seq is None else seq[-1].as_py())
        return True


def _rising(ms: pa.Array, seq: pa.Array | None) -> bool:
    """Whether the ids ``(ms, seq)`` never go down from one row to the next."""
    import pyarrow.compute as pc

    if len(ms) < 2:
        return True
    before, after = ms.slice(0, len(ms) - 1), ms.slice(1)
    up = pc.greater(after, before)
    same = pc.equal(after, before)
    if seq is None:
        return bool(pc.all(pc.or_(up, same)).as_py())
    seq_ok = pc.greater_equal(seq.slice(1), seq.slice(0, len(seq) - 1))
    return bool(pc.all(pc.or_(up, pc.and_(same, seq_ok))).as_py())
