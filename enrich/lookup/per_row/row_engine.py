"""The per-row engine: a :class:`~enrich.lookup.per_row.lookup_join.LookupJoin` driven by
the operator over chunks of keys, one of the two
:class:`~enrich.lookup.interface.JoinEngine` s (the other is the columnar lane).

The operator's records are the chunks, each weighing its rows, so that the operator
counts rows and never has more than ``capacity`` of them in flight; a chunk larger than
the settings' ``chunk_rows`` is refused with a ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from ...engine.caller.wait import AsyncWaitAsyncIterator, WaitIterator
from ...engine.clock import Clock
from ...engine.records.call_metrics import JoinMetrics
from ..contract.lookup_source import LookupSource
from ..join_settings import JoinSettings
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

    Each :meth:`run` is a run of its own (its own join and metrics); :meth:`statistics`
    reads the last one.
    """

    def __init__(
        self, source: LookupSource, settings: JoinSettings, *, clock: Clock | None = None
    ) -> None:
        self.source = source
        self.settings = settings
        self.clock = clock
        self._join: LookupJoin | None = None

    def run(self, chunks: Iterable[Chunk]) -> WaitIterator:
        """Join ``chunks`` on the operator; a blocking iterator of ``JoinedChunk`` s."""
        checked = checked_chunks(chunks, self.settings.chunk_rows)
        it = start_join(WaitIterator, checked, self.source, self.settings, self.clock)
        self._join = it.function
        return it

    def statistics(self) -> JoinMetrics:
        """The last run's metrics (a copy, with the store's adaptive limit if any)."""
        return self._join.statistics() if self._join is not None else JoinMetrics()


def checked_chunks(chunks: Iterable[Chunk], limit: int) -> Iterator[Chunk]:
    """``chunks``, each checked against ``limit`` rows as it is pulled."""
    return (check_chunk(chunk, limit) for chunk in chunks)
