"""The per-row engine: a :class:`~enrich.lookup.per_row.lookup_join.LookupJoin` driven by
the operator over chunks of keys, one of the two
:class:`~enrich.lookup.interface.JoinEngine` s (the other is the columnar lane).

The operator's records are the chunks, each weighing its rows, so that the operator
counts rows and never has more than ``capacity`` of them in flight; a chunk larger than
the settings' ``chunk_rows`` is refused with a ``ValueError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from ...engine.caller.wait import AsyncWaitAsyncIterator, WaitIterator, as_async_iterable
from ...engine.clock import Clock
from ...engine.records.call_metrics import JoinMetrics
from ..contract.lookup_source import LookupSource
from ..join_settings import JoinSettings
from ..outcome import JoinedChunk
from .lookup_join import LookupJoin

Chunk = tuple[Any, Sequence[Any]]

_It = TypeVar("_It", WaitIterator, AsyncWaitAsyncIterator)


def chunk_weight(chunk: Chunk) -> int:
    """A chunk holds one unit of capacity per row (an empty one, one unit)."""
    return max(1, len(chunk[1]))


def check_chunk(chunk: Chunk, limit: int) -> Chunk:
    """``chunk`` if it holds at most ``limit`` rows (the chunk size of the capacity)."""
    if len(chunk[1]) > limit:
        raise ValueError(
            f"a chunk of {len(chunk[1])} rows is larger than {limit}, the chunk size "
            f"for this capacity (see enrich.chunk_rows)"
        )
    return chunk


def start_join(
    kind: type[_It], chunks: Any, source: LookupSource, settings: JoinSettings, clock: Clock | None
) -> _It:
    """The one setup of the blocking and the async run: the join, and the iterator of
    ``kind`` driving it over ``chunks`` (checked already), weighing chunks by rows. The
    join is the iterator's ``function`` (its metrics: ``function.statistics()``)."""
    join = LookupJoin.from_settings(source, settings, clock=clock)
    it = kind(chunks, join, settings=settings.operator(), clock=clock, weigh=chunk_weight)
    it.function = join
    return it


class RowEngine:
    """The per-row engine over ``source`` with ``settings`` (see the module docstring).

    Each :meth:`run` is a run of its own (its own join); :meth:`statistics` adds up the
    runs' metrics.
    """

    def __init__(
        self, source: LookupSource, settings: JoinSettings, *, clock: Clock | None = None
    ) -> None:
        self.source = source
        self.settings = settings
        self.clock = clock
        self._join: LookupJoin | None = None
        self._done = JoinMetrics()  # the metrics of the runs before the last one

    def chunk_keys(self, columns: Sequence[Any]) -> list[Any]:
        """A chunk's keys from its key columns (Arrow arrays): Python values, or tuples
        for several columns (None when any part is null)."""
        if len(columns) == 1:
            return columns[0].to_pylist()  # type: ignore[no-any-return]
        parts = [column.to_pylist() for column in columns]
        return [None if None in key else key for key in zip(*parts, strict=True)]

    def run(self, chunks: Iterable[Chunk]) -> WaitIterator:
        """Join ``chunks`` on the operator; a blocking iterator of ``JoinedChunk`` s."""
        return self._start(WaitIterator, checked_chunks(chunks, self.settings.chunk_rows))

    def run_async(self, chunks: Any) -> AsyncWaitAsyncIterator:
        """:meth:`run`'s async twin, on the caller's loop: ``chunks`` an iterable or an
        async iterable; an async iterator of ``JoinedChunk`` s."""
        checked = checked_async_chunks(chunks, self.settings.chunk_rows)
        return self._start(AsyncWaitAsyncIterator, checked)

    def _start(self, kind: type[_It], checked: Any) -> _It:
        it = start_join(kind, checked, self.source, self.settings, self.clock)
        if self._join is not None:
            self._done.merge(self._join.statistics())
        self._join = it.function
        return it

    def pushed(self) -> PushedRows:
        """A run whose chunks are pushed: each push's chunks are one run, joined at once."""
        return PushedRows(self)

    def statistics(self) -> JoinMetrics:
        """The runs' metrics so far (a copy, with the store's adaptive limit if any)."""
        total = JoinMetrics()
        total.merge(self._done)
        if self._join is not None:
            total.merge(self._join.statistics())
        return total


class PushedRows:
    """A run of ``engine`` whose chunks are pushed (:meth:`RowEngine.pushed`): the chunks
    of one push are one run, handed out before the push returns; nothing stays in
    flight between pushes."""

    def __init__(self, engine: RowEngine) -> None:
        self.engine = engine

    def push(self, chunks: Iterable[Chunk]) -> Iterator[JoinedChunk]:
        """Join ``chunks``; yield their results (none pushed: no run)."""
        pushed = list(chunks)
        if not pushed:
            return
        run = self.engine.run(pushed)
        try:
            yield from run
        finally:
            run.close()

    def drain(self) -> Iterator[JoinedChunk]:
        """Nothing: every push was joined already."""
        return iter(())

    def close(self) -> None:
        """Nothing to cancel between pushes."""


def checked_chunks(chunks: Iterable[Chunk], limit: int) -> Iterator[Chunk]:
    """``chunks``, each checked against ``limit`` rows as it is pulled."""
    return (check_chunk(chunk, limit) for chunk in chunks)


async def checked_async_chunks(
    chunks: Iterable[Chunk] | AsyncIterable[Chunk], limit: int
) -> AsyncIterator[Chunk]:
    """``chunks`` (an iterable or an async iterable), each checked as it is pulled."""
    async for chunk in as_async_iterable(chunks):
        yield check_chunk(chunk, limit)
