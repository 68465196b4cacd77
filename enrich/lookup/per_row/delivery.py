"""A chunk's delivery: its keys' answers in, its rows out as :class:`JoinedChunk` s.

Every answer a chunk receives goes through :meth:`Delivery.give` (one key) or
:meth:`Delivery.give_all` (several keys at once): the answer is recorded, the chunk's
count of unanswered keys goes down, and the chunk completes when it reaches zero. Under
UNORDERED, a chunk that got answers but is not complete is *touched*: the join calls
:meth:`Delivery.release_touched` once per round of answers, and the rows answered so
far leave at once, freeing their share of the capacity. A chunk completes once: its
result, its error or its timeout, whichever comes first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..._errors import LookupTimeout
from ...engine.function import ResultFuture
from ...engine.records.call_metrics import JoinMetrics
from ...engine.records.failure import Failed, error_kind
from ..cache.lookup_cache import MISS
from ..outcome import JoinedChunk, assemble, rows_by_key, take_answered
from .registry import Chunk, Registry

_ONE_WAITER = {Chunk, type(None)}


class Delivery:
    """The chunks in flight (by the id of the operator's record) and their way out.

    Args:
        how: "left" or "inner", for the assembly of the rows.
        on_error: the error policy, for the assembly of the rows.
        metrics: counts the rows out, misses, null keys and errors.
        registry: the keys the chunks wait for; a chunk that ends early leaves it.
    """

    __slots__ = ("_how", "_metrics", "_on_error", "_registry", "_store", "chunks", "touched")

    def __init__(
        self,
        how: str,
        on_error: str,
        metrics: JoinMetrics,
        registry: Registry,
        store: str = "",
    ) -> None:
        self._store = store  # names the source in failed-row warnings (limited per store)
        self._how = how
        self._on_error = on_error
        self._metrics = metrics
        self._registry = registry
        self.chunks: dict[int, Chunk] = {}
        self.touched: list[Chunk] = []  # chunks that got answers and may release rows

    def clear(self) -> None:
        self.chunks.clear()
        self.touched.clear()

    # -- answers in ----------------------------------------------------------------------

    def give(self, chunk: Chunk, key: Any, answer: Any) -> None:
        """Hand ``key``'s answer (rows, MISS or :class:`Failed`) to ``chunk``."""
        if chunk.done:
            return
        chunk.answers[key] = answer
        if type(answer) is not tuple:
            chunk.simple = False
        self._answered(chunk, 1)

    def give_all(self, chunk: Chunk, answers: dict[Any, Any], count: int, simple: bool) -> None:
        """Hand ``count`` of ``chunk``'s keys their answers at once. ``answers`` may hold
        more keys than the chunk waits for (it never reads them); ``simple`` says every
        answer is a single row."""
        if chunk.done:
            return
        chunk.answers.update(answers)
        if not simple:
            chunk.simple = False
        self._answered(chunk, count)

    def _answered(self, chunk: Chunk, count: int) -> None:
        chunk.remaining -= count
        if chunk.remaining == 0:
            self.finish(chunk)
        elif chunk.releases:
            self.touched.append(chunk)

    def give_found(self, keys: list[Any], found: Mapping[Any, Any]) -> None:
        """Hand the answers of ``keys`` to every chunk waiting for them, in bulk, when
        each is a single row or a miss (absent from ``found``). The keys are settled:
        nobody waits for them any more."""
        waiters = self._registry.pop_all(keys)
        if set(map(type, waiters)) <= _ONE_WAITER:
            # The common case: one chunk per key. Each chunk gets the whole call's
            # answers in one dict update, instead of a dict write per key.
            answers = dict.fromkeys(keys, MISS)
            answers.update(found)
            simple = len(found) == len(keys)
            for chunk, count in Counter(waiters).items():
                if chunk is not None:
                    self.give_all(chunk, answers, count, simple)
            return
        # Some key has several chunks waiting for it: settle key by key.
        for key, owner in zip(keys, waiters, strict=True):
            answer = found.get(key, MISS)
            for chunk in (owner,) if type(owner) is Chunk else owner or ():
                self.give(chunk, key, answer)

    # -- rows out ------------------------------------------------------------------------

    def release_touched(self) -> None:
        """Let the answered rows of the chunks that got answers leave (UNORDERED)."""
        touched = self.touched
        if not touched:
            return
        self.touched = []
        for chunk in dict.fromkeys(touched):
            if not chunk.done and chunk.remaining:
                self.release(chunk)

    def release(self, chunk: Chunk) -> None:
        """Release the chunk's answered rows that have not left yet, freeing their share
        of the capacity; the rest leave when the chunk completes."""
        unreleased = chunk.unreleased
        if unreleased is None:
            unreleased = chunk.unreleased = rows_by_key(chunk.keys)
        rows = take_answered(unreleased, chunk.answers)
        if not rows:
            return
        try:
            joined = self._assemble(chunk, rows)
        except BaseException as exc:  # a row's error under on_error="fail"
            chunk.done = True
            self.chunks.pop(chunk.ident, None)
            self._registry.leave(chunk)
            chunk.result.complete_exceptionally(exc)
            return
        chunk.result.release([joined], len(rows))

    def finish(self, chunk: Chunk) -> None:
        """Complete the chunk's record with its rows' outcomes, in row order."""
        chunk.done = True
        self.chunks.pop(chunk.ident, None)
        rows = None
        if chunk.unreleased is not None:  # some rows left early: the others leave now
            rows = sorted(i for indices in chunk.unreleased.values() for i in indices)
        try:
            joined = self._assemble(chunk, rows)
        except BaseException as exc:
            chunk.result.complete_exceptionally(exc)
        else:
            chunk.result.complete([joined])

    def fail(self, chunk: Chunk, error: BaseException) -> None:
        """Complete the chunk's record with ``error`` (on_error="fail"): there is no need
        to wait for its other keys, the run fails."""
        chunk.done = True
        self.chunks.pop(chunk.ident, None)
        self._registry.leave(chunk)
        self._metrics.errors[error_kind(error)] += 1
        chunk.result.complete_exceptionally(error)

    def time_out(self, chunk: Chunk, result: ResultFuture, timeout: float) -> None:
        """The chunk's deadline passed: its unanswered keys time out, row by row; it
        leaves the requests it shared, which go on for the other chunks."""
        registry = self._registry
        answers = chunk.answers
        # The attempts are read before leaving: a key only this chunk waited for is
        # forgotten by leave(), its count with it.
        timed_out = {
            key: Failed(LookupTimeout(key, timeout, registry.attempt(key)))
            for key in dict.fromkeys(chunk.keys)
            if key not in answers
        }
        registry.leave(chunk)
        answers.update(timed_out)
        chunk.simple = False
        chunk.remaining = 0
        chunk.result = result  # the operator only accepts the timeout's own completion
        self.finish(chunk)

    def _assemble(self, chunk: Chunk, rows: list[int] | None = None) -> JoinedChunk:
        return assemble(
            chunk.tag,
            chunk.keys,
            chunk.answers,
            chunk.simple,
            self._how,
            self._on_error,
            self._metrics,
            rows,
            store=self._store,
        )
