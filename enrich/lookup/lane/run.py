"""The columnar lane of a lookup join: chunks of Arrow keys, pipelined, joined by ``take``.

A chunk's keys stay an Arrow array: null keys and distinct keys come from
``dictionary_encode``, the distinct keys go to the source's ``lookup_arrow`` in calls of
at most ``max_batch`` keys, and each row's dimension struct is the answer of its key
taken by index. While the task thread assembles one chunk, the requests of the chunks
after it are already in flight on the runtime loop, up to ``capacity`` rows.

Per-row Python remains only for a chunk that needs it: one with an error, a 1:N key or
a timeout goes through :func:`enrich.lookup.outcome.assemble`, exactly as the per-row
join assembles it, so its rows get the same outcomes, reasons and metrics.

Semantics (those of the per-row join, see the README's table):

* at most ``capacity`` rows are in flight (admitted and not yet handed out);
* chunks are handed out in input order (ORDERED; under UNORDERED this is allowed too);
* a row's timeout measures the store: each call has its own deadline, which moves on
  while the call waits for a connection, a permit or a load
  (:mod:`enrich.lookup.lane.source_calls`); a call not answered by then fails its keys
  with :class:`~enrich.LookupTimeout` (rows answered in time keep their answer);
* null keys join nothing and ask nothing; misses follow ``how``; errors follow
  ``on_error``; the metrics count rows, misses, null keys, errors, cache hits and
  requests as the per-row join does.

The loop's side (:mod:`enrich.lookup.lane.resolve`) probes the cache when a chunk is
admitted and makes the requests (:mod:`enrich.lookup.lane.source_calls`), with retries per the
per-row join's rules (:mod:`enrich.lookup.lane.key_retries`; a key pending in two chunks at
once is asked for each). Decoding happens on the task thread where it can: a source with
``fetch_arrow`` (see :class:`~enrich.lookup.contract.columnar_answer.ColumnarSource`) hands the
raw replies over with a decode step, which the task thread runs when it assembles the
chunk; it takes the chunk's rows from the decoded answer and the cache's hits in one
``take`` and hands the answer back to the loop, which fills the store (a chunk admitted
before that fill asks those keys again, as for any key pending in two chunks). The cache
is probed, filled and merged a chunk's distinct keys at a time
(:mod:`enrich.lookup.lane.cache_probe`), in the store the per-row join of the same source uses.

Imports no pyspark.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...engine.records.call_metrics import JoinMetrics, record_concurrency
from ...engine.records.failure import Failed
from ...engine.runtime import get_loop
from ..cache.lookup_cache import MISS, LookupCache
from ..contract.columnar_answer import ColumnarAnswer, ColumnarSource, struct_rows
from ..join_settings import JoinSettings
from ..outcome import NULL_KEY, ColumnarJoined, JoinedChunk, assemble
from .resolve import ChunkResolver
from .source_calls import LaneCalls, Resolved


@dataclass(slots=True)
class LaneChunk:
    """A chunk admitted to the lane (:meth:`ColumnarLane.start`): its distinct keys'
    lookups are under way on the runtime loop until :meth:`ColumnarLane.finish`.

    Attributes:
        tag: the chunk's tag, as given.
        size: its rows.
        indices: for each row, its key's position among ``distinct`` (null: a null key).
        distinct: the chunk's distinct non-null keys.
        future: what the loop resolves for them.
    """

    tag: Any
    size: int
    indices: pa.Array
    distinct: pa.Array
    future: Future[Resolved]

    def is_answered(self) -> bool:
        """Whether the loop has resolved the chunk's keys (:meth:`ColumnarLane.finish`
        then does not wait)."""
        return self.future.done()

    def cancel(self) -> None:
        """Cancel the chunk's requests (a run closed early)."""
        self.future.cancel()


def is_columnar_key(keys: pa.Array) -> bool:
    """Whether the lane takes keys of this Arrow type (integers and strings: their
    distinct values are the same in Arrow and in Python)."""
    kind = keys.type
    return bool(
        pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
    )


class ColumnarLane:
    """Runs a join's chunks ``(tag, keys)`` on the columnar lane (see the module docstring):
    one of the two :class:`~enrich.lookup.interface.JoinEngine` s.

    A chunk is admitted by :meth:`start` and handed out by :meth:`finish`; :meth:`run`
    pulls chunks through both (``capacity`` rows in flight at most), and :meth:`pushed`
    takes them as a caller is pushed them (an Arrow table function).

    Args:
        source: a :class:`ColumnarSource`.
        struct_type: the Arrow struct of the dimension fields.
        settings: the join's settings, taken whole (``how``, ``on_error``, ``timeout``,
            ``capacity``: rows in flight at most, admitted and not yet handed out,
            ``max_batch``, ``retry``, and its :class:`~enrich.LookupCache` if any; a
            full cache comes in front of the source instead, see
            :func:`enrich.lookup.engines.engine_for`).
        metrics: where the lane counts (read and written on the caller's thread only;
            default: a new one).
    """

    def __init__(
        self,
        source: ColumnarSource,
        struct_type: pa.StructType,
        settings: JoinSettings,
        *,
        metrics: JoinMetrics | None = None,
    ) -> None:
        cache = settings.cache if isinstance(settings.cache, LookupCache) else None
        timeout = settings.timeout
        retry = settings.retry
        self.source = source
        self.struct_type = struct_type
        self.settings = settings
        self.how = settings.how
        self.on_error = settings.on_error
        self.cache = cache
        self.timeout = timeout
        self.capacity = settings.capacity
        self.max_batch = settings.max_batch
        self.metrics = metrics if metrics is not None else JoinMetrics()
        self.retry = retry
        self._calls = LaneCalls(source, struct_type, timeout, self.max_batch)
        self._resolver = ChunkResolver(
            source, struct_type, self._calls, cache=cache, timeout=timeout, retry=retry
        )
        self._store_name = repr(source)  # failed-row warnings are limited per store
        self._filled: Future[None] | None = None  # the last fill handed to the loop

    def run(
        self, chunks: Iterable[tuple[Any, pa.Array]]
    ) -> Generator[ColumnarJoined | JoinedChunk, None, None]:
        """Yields one result per chunk, in input order; a chunk larger than ``capacity``
        is admitted alone. Closing the iterator cancels the requests still in flight."""
        pushed = self.pushed()
        try:
            for chunk in chunks:
                yield from pushed.push((chunk,))
            yield from pushed.drain()
        finally:
            pushed.close()

    def pushed(self) -> PushedLane:
        """A run whose chunks are pushed to it (an Arrow table function's batches)."""
        return PushedLane(self)

    def chunk_keys(self, columns: Sequence[pa.Array]) -> pa.Array:
        """A chunk's keys as the lane takes them: its one key column, as it is."""
        (keys,) = columns
        return keys

    def statistics(self) -> JoinMetrics:
        """The lane's metrics so far (a copy, with the store's adaptive limit if any)."""
        record_concurrency(self.metrics, self.source)
        copy = JoinMetrics()
        copy.merge(self.metrics)
        return copy

    def start(self, tag: Any, keys: pa.Array) -> LaneChunk:
        """Admit a chunk: its distinct keys' lookups start at once on the runtime loop."""
        size = len(keys)
        encoded = pc.dictionary_encode(keys) if size else None
        indices = encoded.indices if encoded is not None else pa.array([], pa.int32())
        distinct = encoded.dictionary if encoded is not None else keys
        future = asyncio.run_coroutine_threadsafe(self._resolver.resolve(distinct), get_loop())
        self.metrics.rows_in += size
        self.metrics.coalesced += size - indices.null_count - len(distinct)
        return LaneChunk(tag, size, indices, distinct, future)

    def wait_filled(self) -> None:
        """Wait until the store holds the answers of the chunks handed out (a run's end:
        the next run of the process finds them cached)."""
        if self._filled is not None:
            self._filled.result()

    # -- on the task thread --------------------------------------------------------------

    def finish(self, item: LaneChunk) -> ColumnarJoined | JoinedChunk:
        """A started chunk's rows (waiting for its answers if need be), in row order."""
        resolved = item.future.result()
        metrics = self.metrics
        metrics.requests += resolved.requests
        metrics.keys_requested += resolved.keys_requested
        for latency in resolved.latencies:
            metrics.latency.record(latency)
        metrics.cache_hits += resolved.cache_hits
        metrics.cache_misses += resolved.cache_misses
        metrics.retries += resolved.retries
        probe = resolved.probe
        fetched = None
        if resolved.parts is not None:
            fetched = self._calls.settle(resolved.parts)
            if probe is not None:
                self._filled = asyncio.run_coroutine_threadsafe(
                    self._resolver.fill(probe, fetched), get_loop()
                )
        # With a cache, the hits and the fetched rows are taken for the chunk's rows at
        # once; a chunk with an error or a 1:N key is merged and goes row by row.
        structs = probe.join_rows(fetched, item.indices) if probe is not None else None
        if structs is None:
            if probe is not None:
                answer = probe.merge(fetched, self.struct_type)
            else:
                answer = resolved.answer if fetched is None else fetched
            if not answer.is_simple():
                return self._per_row(item, answer)
            structs = answer.rows.take(item.indices)
        found = len(structs) - structs.null_count
        null_keys = item.indices.null_count
        metrics.null_keys += null_keys
        metrics.misses += item.size - null_keys - found
        if self.how == "inner":
            metrics.rows_out += found
            keep = structs.is_valid() if found < item.size else None
            return ColumnarJoined(item.tag, structs, keep)
        metrics.rows_out += item.size
        return ColumnarJoined(item.tag, structs, None)

    def _per_row(self, item: LaneChunk, answer: ColumnarAnswer) -> JoinedChunk:
        """A chunk with errors, timeouts or 1:N keys, assembled row by row."""
        distinct = item.distinct.to_pylist()
        rows = struct_rows(answer.rows)
        answers: dict[Any, Any] = {None: NULL_KEY}
        for position, key in enumerate(distinct):
            if position in answer.errors:
                answers[key] = Failed(answer.errors[position])
            elif position in answer.multi:
                answers[key] = answer.multi[position]
            else:
                row = rows[position]
                answers[key] = MISS if row is None else row
        keys = [None if i is None else distinct[i] for i in item.indices.to_pylist()]
        return assemble(
            item.tag,
            keys,
            answers,
            False,
            self.how,
            self.on_error,
            self.metrics,
            store=self._store_name,
        )


class PushedLane:
    """A run of ``lane`` whose chunks are pushed (:meth:`ColumnarLane.pushed`): each
    pushed chunk's lookups start at once on the runtime loop, the chunks whose answers
    are in are handed out in input order, and at most ``capacity`` rows are in flight
    (a chunk larger than that is admitted alone)."""

    def __init__(self, lane: ColumnarLane) -> None:
        self.lane = lane
        self._pending: deque[LaneChunk] = deque()
        self._in_flight = 0

    def push(
        self, chunks: Iterable[tuple[Any, pa.Array]]
    ) -> Iterator[ColumnarJoined | JoinedChunk]:
        """Start ``chunks``; yield the results of the chunks already answered (or in
        the way of the capacity)."""
        lane = self.lane
        pending = self._pending
        for tag, keys in chunks:
            size = len(keys)
            while pending and (self._in_flight + size > lane.capacity or pending[0].is_answered()):
                yield self._hand_out()
            pending.append(lane.start(tag, keys))
            self._in_flight += size

    def drain(self) -> Iterator[ColumnarJoined | JoinedChunk]:
        """Yield the results of every chunk still in flight, in order; the cache holds
        their answers when it ends."""
        while self._pending:
            yield self._hand_out()
        self.lane.wait_filled()

    def close(self) -> None:
        """Cancel the chunks still in flight."""
        for item in self._pending:
            item.cancel()
        self._pending.clear()

    def _hand_out(self) -> ColumnarJoined | JoinedChunk:
        head = self._pending.popleft()
        self._in_flight -= head.size
        return self.lane.finish(head)
