"""The columnar lane of a lookup join: chunks of Arrow keys, pipelined, joined by ``take``.

A chunk's keys stay an Arrow array: null keys and distinct keys come from
``dictionary_encode``, the distinct keys go to the source's ``lookup_arrow`` in calls of
at most ``max_batch`` keys, and each row's dimension struct is the answer of its key
taken by index. While the task thread assembles one chunk, the requests of the chunks
after it are already in flight on the runtime loop, up to ``capacity`` rows.

Per-row Python remains only for a chunk that needs it: one with an error, a 1:N key or
a timeout goes through :func:`enrich.lookup.joined.assemble`, exactly as the per-row
join assembles it, so its rows get the same outcomes, reasons and metrics.

Semantics (those of the per-row join, see the README's table):

* at most ``capacity`` rows are in flight (admitted and not yet handed out);
* chunks are handed out in input order (ORDERED; under UNORDERED this is allowed too);
* a row's timeout runs from its chunk's admission; a call not answered by then fails
  its keys with :class:`~enrich.LookupTimeout` (rows answered in time keep their answer);
* null keys join nothing and ask nothing; misses follow ``how``; errors follow
  ``on_error``; the metrics count rows, misses, null keys, errors, cache hits and
  requests as the per-row join does.

Retries follow the per-row join's rules (see :mod:`enrich.lookup.columnar_retry`), per
chunk: a key pending in two chunks at once is asked for each.
Imports no pyspark.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Generator, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .._errors import LookupTimeout
from ..engine.retry import RetryStrategy
from ..engine.runtime import get_loop
from .cache import MISS, LookupCache
from .columnar import (
    ColumnarAnswer,
    ColumnarSource,
    concat_answers,
    rows_to_struct,
    struct_rows,
)
from .columnar_retry import with_retries
from .join import _scope
from .joined import NULL_KEY, Failed, JoinedChunk, assemble
from .metrics import JoinMetrics


@dataclass(slots=True)
class ColumnarJoined:
    """A chunk joined on the columnar lane.

    Attributes:
        tag: the chunk's tag, as given.
        structs: one dimension struct per input row (null: nothing joined).
        keep: the rows that stay (an inner join's filter), or None for all of them.
    """

    tag: Any
    structs: pa.StructArray
    keep: pa.Array | None


@dataclass(slots=True)
class _Resolved:
    """What the loop found for a chunk's distinct keys, and its counters."""

    answer: ColumnarAnswer
    requests: int = 0
    keys_requested: int = 0
    latencies: list[float] = field(default_factory=list)
    cache_hits: int = 0
    cache_misses: int = 0
    retries: int = 0


@dataclass(slots=True)
class _Pending:
    tag: Any
    size: int
    indices: pa.Array
    distinct: pa.Array
    future: Future[_Resolved]


def is_columnar_key(keys: pa.Array) -> bool:
    """Whether the lane takes keys of this Arrow type (integers and strings: their
    distinct values are the same in Arrow and in Python)."""
    kind = keys.type
    return bool(
        pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
    )


class ColumnarLane:
    """Runs a join's chunks ``(tag, keys)`` on the columnar lane (see the module docstring).

    Args:
        source: a :class:`ColumnarSource`.
        struct_type: the Arrow struct of the dimension fields.
        how / on_error / cache / timeout / max_batch / retry: as for ``LookupJoin``.
        capacity: rows in flight at most (admitted, not yet handed out).
        metrics: where the lane counts (read and written on the caller's thread only).
    """

    def __init__(
        self,
        source: ColumnarSource,
        struct_type: pa.StructType,
        *,
        how: str,
        on_error: str,
        cache: LookupCache | None,
        timeout: float | None,
        capacity: int,
        max_batch: int,
        metrics: JoinMetrics,
        retry: RetryStrategy | None = None,
    ) -> None:
        self.source = source
        self.struct_type = struct_type
        self.how = how
        self.on_error = on_error
        self.cache = cache
        self.timeout = timeout
        self.capacity = capacity
        self.max_batch = max_batch
        self.metrics = metrics
        self.retry = retry

    def run(
        self, chunks: Iterable[tuple[Any, pa.Array]]
    ) -> Generator[ColumnarJoined | JoinedChunk, None, None]:
        """Yields one result per chunk, in input order; a chunk larger than ``capacity``
        is admitted alone. Closing the iterator cancels the requests still in flight."""
        loop = get_loop()
        pending: deque[_Pending] = deque()
        in_flight = 0
        try:
            for tag, keys in chunks:
                size = len(keys)
                while pending and (in_flight + size > self.capacity or pending[0].future.done()):
                    head = pending.popleft()
                    in_flight -= head.size
                    yield self._assemble(head)
                encoded = pc.dictionary_encode(keys) if size else None
                indices = encoded.indices if encoded is not None else pa.array([], pa.int32())
                distinct = encoded.dictionary if encoded is not None else keys
                future = asyncio.run_coroutine_threadsafe(self._resolve(distinct), loop)
                pending.append(_Pending(tag, size, indices, distinct, future))
                in_flight += size
                self.metrics.rows_in += size
                self.metrics.coalesced += size - indices.null_count - len(distinct)
            while pending:
                yield self._assemble(pending.popleft())
        finally:
            for item in pending:
                item.future.cancel()

    # -- on the loop ---------------------------------------------------------------------

    async def _resolve(self, distinct: pa.Array) -> _Resolved:
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.timeout if self.timeout is not None else None
        count = len(distinct)
        resolved = _Resolved(ColumnarAnswer(pa.array([], type=self.struct_type)))
        store = None
        if self.cache is not None:  # the same store the per-row join of this source uses
            store = self.cache.storage(_scope(self.source))  # type: ignore[arg-type]
        hits: dict[int, Any] = {}
        ask = distinct
        ask_positions: list[int] | None = None
        keys: list[Any] = []
        if store is not None and count:
            keys = distinct.to_pylist()
            ask_positions = []
            for position, key in enumerate(keys):
                cached = store.get(key, started)
                if cached is None:
                    ask_positions.append(position)
                else:
                    hits[position] = cached
            resolved.cache_hits = len(hits)
            resolved.cache_misses = len(ask_positions)
            ask = distinct.take(pa.array(ask_positions, pa.int64()))
        fetched = None
        if len(ask):
            fetched = await self._attempt(ask, 1, deadline, resolved)
            if self.retry is not None:
                fetched, resolved.retries = await with_retries(
                    lambda keys, number: self._attempt(keys, number, deadline, resolved),
                    ask,
                    fetched,
                    self.retry,
                    deadline,
                )
        if store is not None:
            self._fill_cache(store, keys, ask_positions or [], fetched, loop.time())
        resolved.answer = self._merge(count, fetched, ask_positions, hits)
        return resolved

    async def _attempt(
        self, keys: pa.Array, number: int, deadline: float | None, resolved: _Resolved
    ) -> ColumnarAnswer:
        """One attempt for ``keys``: calls of at most ``max_batch`` keys, concurrently; a
        call that raises fails its keys, one still out at the deadline times them out."""
        loop = asyncio.get_running_loop()
        size = self.max_batch
        if getattr(self.source, "splits_requests", False):
            # The source bounds its own requests (RedisLookup: MGETs of its max_batch,
            # pipelined); one call per attempt lets it decode them in one go, which
            # costs one GIL hand-over instead of one per request (measured: the decoder
            # releases the GIL and then waits up to the switch interval to get it back).
            size = max(1, len(keys))
        slices = [keys.slice(start, size) for start in range(0, len(keys), size)]
        calls = [loop.create_task(self._call(part, resolved)) for part in slices]
        timeout = None if deadline is None else max(0.0, deadline - loop.time())
        _, late = await asyncio.wait(calls, timeout=timeout)
        parts: list[ColumnarAnswer] = []
        for call, part in zip(calls, slices, strict=True):
            if call in late:
                call.cancel()
                parts.append(self._failed(part, None, number))
            elif call.exception() is not None:
                parts.append(self._failed(part, call.exception(), number))
            else:
                parts.append(call.result())
        return concat_answers(parts, self.struct_type)

    async def _call(self, keys: pa.Array, resolved: _Resolved) -> ColumnarAnswer:
        loop = asyncio.get_running_loop()
        resolved.requests += 1
        resolved.keys_requested += len(keys)
        started = loop.time()
        try:
            answer = await self.source.lookup_arrow(keys, self.struct_type)
        finally:
            resolved.latencies.append(loop.time() - started)
        if len(answer) != len(keys):
            raise TypeError(f"lookup_arrow answered {len(answer)} rows for {len(keys)} keys")
        return answer

    def _failed(self, keys: pa.Array, error: BaseException | None, number: int) -> ColumnarAnswer:
        """Every key of a call that raised (``error``) or timed out (None)."""
        listed = keys.to_pylist()
        errors: dict[int, BaseException] = {}
        for position, key in enumerate(listed):
            errors[position] = (
                error
                if error is not None
                else LookupTimeout(key, self.timeout if self.timeout is not None else 0.0, number)
            )
        return ColumnarAnswer(pa.nulls(len(listed), type=self.struct_type), errors)

    def _fill_cache(
        self,
        store: Any,
        keys: list[Any],
        positions: list[int],
        fetched: ColumnarAnswer | None,
        now: float,
    ) -> None:
        if fetched is None:
            return
        rows = struct_rows(fetched.rows)
        for i, position in enumerate(positions):
            key = keys[position]
            if i in fetched.errors:
                store.failed()
            elif i in fetched.multi:
                store.put(key, fetched.multi[i], now)
            else:
                row = rows[i]
                store.put(key, MISS if row is None else row, now)

    def _merge(
        self,
        count: int,
        fetched: ColumnarAnswer | None,
        positions: list[int] | None,
        hits: dict[int, Any],
    ) -> ColumnarAnswer:
        """The answer for every distinct key: fetched ones and cached ones, in order."""
        if positions is None:  # no cache: the fetched answer is aligned already
            return (
                fetched
                if fetched is not None
                else ColumnarAnswer(rows_to_struct([], self.struct_type))
            )
        errors: dict[int, BaseException] = {}
        multi: dict[int, Any] = {}
        hit_rows: list[Any] = []
        order: list[int] = [0] * count
        for position, cached in hits.items():
            order[position] = len(positions) + len(hit_rows)
            if type(cached) is tuple:
                hit_rows.append(cached)
            else:
                hit_rows.append(None)
                if cached is not MISS:
                    multi[position] = cached
        for i, position in enumerate(positions):
            order[position] = i
            if fetched is not None:
                if i in fetched.errors:
                    errors[position] = fetched.errors[i]
                if i in fetched.multi:
                    multi[position] = fetched.multi[i]
        pieces = [] if fetched is None else [fetched.rows]
        pieces.append(rows_to_struct(hit_rows, self.struct_type))
        rows = pa.concat_arrays(pieces).take(pa.array(order, pa.int64()))
        return ColumnarAnswer(rows, errors, multi)

    # -- on the task thread --------------------------------------------------------------

    def _assemble(self, item: _Pending) -> ColumnarJoined | JoinedChunk:
        resolved = item.future.result()
        metrics = self.metrics
        metrics.requests += resolved.requests
        metrics.keys_requested += resolved.keys_requested
        for latency in resolved.latencies:
            metrics.latency.record(latency)
        metrics.cache_hits += resolved.cache_hits
        metrics.cache_misses += resolved.cache_misses
        metrics.retries += resolved.retries
        answer = resolved.answer
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

    def _per_row(self, item: _Pending, answer: ColumnarAnswer) -> JoinedChunk:
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
        return assemble(item.tag, keys, answers, False, self.how, self.on_error, self.metrics)
