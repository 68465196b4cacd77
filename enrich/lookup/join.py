"""The lookup join: Flink's async lookup join, batched and coalesced, with error policies.

Semantics are per row, execution is per chunk. The operator admits *chunks* of rows
(a slice of an Arrow batch, a list of dicts); :class:`LookupJoin` answers what it can
from the cache, coalesces rows whose key is already pending or in flight (in any chunk),
and sends the remaining distinct keys to the source in ``lookup_many`` calls of at most
``max_batch`` keys. Each row gets its own outcome: its rows, a miss, or an error that the
``on_error`` policy turns into a null row, no row, a row with the reason, or a failure.

Answers reach their rows key by key, as the source hands them over (``lookup_each``,
else when ``lookup_many`` returns). Retries are per key, with the engine's retry
strategies; each row keeps its own deadline (rows answered in time keep their answer,
and a row that times out leaves the shared request). Under UNORDERED, the rows of a
chunk that are answered leave at once, and free their capacity, without waiting for
their chunk-mates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

from .._errors import LookupFailed, LookupTimeout
from ..engine.clock import Clock, LoopClock, Timer
from ..engine.function import AsyncFunction, ResultFuture
from ..engine.retry import RetryStrategy
from .cache import MISS, CacheStatistics, LookupCache
from .joined import (
    NULL_KEY,
    Failed,
    JoinedChunk,
    as_rows,
    assemble,
    error_kind,
    rows_by_key,
    take_answered,
)
from .keys import BadKey, admit_keys
from .metrics import JoinMetrics
from .settings import DEFAULT_MAX_BATCH, JoinSettings
from .source import LookupSource, hands_over_each

log = logging.getLogger("enrich.lookup")


class _Chunk:
    """A chunk in flight: the answer of each of its distinct keys, and how many of its
    keys are still unanswered. Rows share their key's answer. A chunk that may release
    its rows early (UNORDERED) keeps the rows not released yet, by key."""

    __slots__ = (
        "answers",
        "deadline",
        "done",
        "ident",
        "keys",
        "releases",
        "remaining",
        "result",
        "simple",
        "tag",
        "unreleased",
    )

    def __init__(
        self, ident: int, tag: Any, keys: Sequence[Any], result: ResultFuture, deadline: float
    ) -> None:
        self.ident = ident
        self.tag = tag
        self.keys = keys
        self.result = result
        self.deadline = deadline
        self.done = False
        self.answers: dict[Any, Any] = {}
        self.remaining = 0  # distinct keys not answered yet
        self.simple = True  # every answer so far is a single row (the fast case)
        self.releases = result.can_release
        self.unreleased: dict[Any, list[int]] | None = None  # after a first release


class LookupJoin(AsyncFunction):
    """Joins chunks of keys with the rows a :class:`~enrich.LookupSource` holds for them.

    Each record the operator gives it is a chunk ``(tag, keys)``: ``keys[i]`` is the key
    of row ``i`` (a scalar, a tuple for a composite key, or None, which joins nothing).
    A key part is a ``str``, an ``int`` (not a ``bool``) or ``bytes``; a row whose key is
    anything else fails alone, under ``on_error`` (see :mod:`enrich.lookup.keys`).
    It completes each chunk with one :class:`JoinedChunk`. Use :func:`lookup_rows` or
    ``enrich.spark.lookup_join`` rather than driving it by hand.

    Args:
        source: the dimension store.
        how: "left" keeps rows whose key is missing (null fields); "inner" drops them.
        on_error: what a row's error becomes: "fail" (raise, ending the run), "null"
            (a row with null fields), "drop" (no row), or "error_column" (a row with
            null fields and the reason).
        cache: a :class:`~enrich.LookupCache`, shared by every join of the process that
            uses the same cache and source.
        retry: per-key retries (on errors the error calls retryable, and on misses with
            ``retry_on_result``); a retry is made for the rows whose deadline it starts
            before (for the others the last outcome stands), never reads the cache.
        timeout: seconds a chunk's rows have, from admission to answer (give the
            operator the same timeout: its timer calls :meth:`timeout`). A row that
            times out leaves the request its key shares with other chunks' rows.
        max_batch: keys per ``lookup_many`` call at most.
        clock: the time source (default: the running loop's).

    The settings are checked once, into a :class:`~enrich.lookup.settings.JoinSettings`
    (a bad one raises ``ValueError`` naming it and its value); entry points that built
    one already use :meth:`from_settings`.

    No row is lost: each yields its outputs, is dropped by an inner join's miss or the
    "drop" policy, or fails the run ("fail"); the metrics count every one.
    """

    def __init__(
        self,
        source: LookupSource,
        *,
        how: str = "left",
        on_error: str = "fail",
        cache: LookupCache | None = None,
        retry: RetryStrategy | None = None,
        timeout: float | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        clock: Clock | None = None,
    ) -> None:
        settings = JoinSettings(
            how=how,
            on_error=on_error,
            cache=cache,
            retry=retry,
            timeout=timeout,
            max_batch=max_batch,
        )
        self._setup(source, settings, clock)

    @classmethod
    def from_settings(
        cls, source: LookupSource, settings: JoinSettings, *, clock: Clock | None = None
    ) -> LookupJoin:
        """A join with settings already built (and validated) by an entry point."""
        join = cls.__new__(cls)
        join._setup(source, settings, clock)
        return join

    def _setup(self, source: LookupSource, settings: JoinSettings, clock: Clock | None) -> None:
        self.settings = settings
        self.source = source
        self.how = settings.how
        self.on_error = settings.on_error
        self.cache = settings.cache
        self.retry = settings.retry
        self.max_batch = settings.max_batch
        self.metrics = JoinMetrics()
        self._timeout = settings.timeout
        self._clock = clock
        self._store: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # key -> the chunk waiting for it, or a list when several chunks wait
        self._waiting: dict[Any, Any] = {}
        self._attempts: dict[Any, int] = {}  # calls made for a key still waited for
        self._pending: list[Any] = []
        self._flush_scheduled = False
        self._chunks: dict[int, _Chunk] = {}  # by id of the operator's record
        self._requests: set[asyncio.Task[None]] = set()
        self._retry_timers: dict[Any, Timer] = {}  # by key
        self._touched: list[_Chunk] = []  # chunks that got answers and may release rows

    def __repr__(self) -> str:
        return f"LookupJoin({self.source!r}, how={self.how!r}, on_error={self.on_error!r})"

    # -- lifecycle ---------------------------------------------------------------------

    def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._clock is None:
            self._clock = LoopClock(self._loop)
        if self.cache is not None:
            self._store = self.cache.storage(_scope(self.source))

    def close(self) -> None:
        for request in self._requests:
            request.cancel()
        for timer in self._retry_timers.values():
            timer.cancel()
        self._requests.clear()
        self._retry_timers.clear()
        self._waiting.clear()
        self._attempts.clear()
        self._pending.clear()
        self._chunks.clear()
        self._touched.clear()

    def cache_statistics(self) -> CacheStatistics | None:
        """This process's statistics of the join's cache (None without a cache)."""
        return self._store.statistics() if self._store is not None else None

    def statistics(self) -> JoinMetrics:
        """This join's metrics so far (a copy)."""
        copy = JoinMetrics()
        copy.merge(self.metrics)
        return copy

    # -- chunks in -----------------------------------------------------------------------

    def async_invoke_many(self, values: Sequence[Any], results: Sequence[ResultFuture]) -> None:
        clock = self._clock
        assert clock is not None, "open() was not called"
        now = clock.now()
        deadline = now + self._timeout if self._timeout is not None else float("inf")
        metrics = self.metrics
        store = self._store
        waiting = self._waiting
        pending = self._pending
        for value, result in zip(values, results, strict=True):
            tag, keys = value
            chunk = _Chunk(id(value), tag, keys, result, deadline)
            self._chunks[chunk.ident] = chunk
            answers = chunk.answers
            metrics.rows_in += len(keys)
            admitted = admit_keys(keys, self.settings.on)
            if admitted is not keys:  # a key breaks the key rule: its row fails alone
                chunk.keys = keys = self._stand_in_bad_keys(chunk, admitted)
            distinct = dict.fromkeys(keys)
            shared = len(keys) - len(distinct)  # rows repeating a key of this chunk
            if None in distinct:
                del distinct[None]
                answers[None] = NULL_KEY
                chunk.simple = False
                shared -= keys.count(None) - 1
            if store is None and not answers:
                # The common case, in bulk: register the chunk for every key nobody
                # waits for yet, and join the few keys already pending elsewhere.
                for key in distinct.keys() & waiting.keys():
                    del distinct[key]
                    waiters = waiting[key]
                    if type(waiters) is _Chunk:
                        waiting[key] = [waiters, chunk]
                    else:
                        waiters.append(chunk)
                    chunk.remaining += 1
                    shared += 1
                waiting.update(zip(distinct, repeat(chunk)))
                pending.extend(distinct)
                chunk.remaining += len(distinct)
                metrics.coalesced += shared
                if chunk.remaining == 0:
                    self._finish(chunk)
                continue
            for key in distinct:
                if key in answers:  # a stand-in for a bad key, already failed
                    continue
                waiters = waiting.get(key)
                if waiters is not None:
                    if type(waiters) is _Chunk:
                        waiting[key] = [waiters, chunk]
                    else:
                        waiters.append(chunk)
                    chunk.remaining += 1
                    shared += 1
                    continue
                if store is not None:
                    cached = store.get(key, now)
                    if cached is not None:
                        metrics.cache_hits += 1
                        answers[key] = cached
                        if type(cached) is not tuple:
                            chunk.simple = False
                        continue
                    metrics.cache_misses += 1
                waiting[key] = chunk
                chunk.remaining += 1
                pending.append(key)
            metrics.coalesced += shared
            if chunk.remaining == 0:
                self._finish(chunk)
            elif chunk.releases and answers:
                self._release(chunk)  # cached rows and null keys leave at once
        self._schedule_flush()

    def _stand_in_bad_keys(self, chunk: _Chunk, keys: list[Any]) -> list[Any]:
        """Fail the rows whose key broke the rule (each :class:`BadKey` is its own key)."""
        for key in keys:
            if type(key) is BadKey:
                chunk.answers[key] = Failed(key.error)
                chunk.simple = False
        return keys

    def _schedule_flush(self) -> None:
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif self._pending and not self._flush_scheduled:
            # Let keys admitted in the same loop iteration share the request.
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]

    def _flush(self) -> None:
        self._flush_scheduled = False
        keys, self._pending = self._pending, []
        size = self.max_batch
        loop = self._loop
        assert loop is not None
        for start in range(0, len(keys), size):
            request = loop.create_task(self._fetch(keys[start : start + size]))
            self._requests.add(request)
            request.add_done_callback(self._requests.discard)

    # -- answers -------------------------------------------------------------------------

    async def _fetch(self, keys: list[Any]) -> None:
        metrics = self.metrics
        clock = self._clock
        assert clock is not None
        metrics.requests += 1
        metrics.keys_requested += len(keys)
        if self.retry is not None:  # attempts matter only to retries (and their reports)
            attempts = self._attempts
            for key in keys:
                attempts[key] = attempts.get(key, 0) + 1
        started = clock.now()
        if hands_over_each(self.source):
            await self._fetch_each(keys, started)
            return
        try:
            found = await self.source.lookup_many(keys)
        except Exception as exc:
            metrics.latency.record(clock.now() - started)
            self._fail_keys(keys, exc)
            return
        metrics.latency.record(clock.now() - started)
        self._deliver(keys, found)

    async def _fetch_each(self, keys: list[Any], started: float) -> None:
        """Deliver the answers of a source's ``lookup_each`` as they arrive; keys never
        answered are misses, and keys not answered when it raises fail with the error."""
        left = dict.fromkeys(keys)
        error: Exception | None = None
        try:
            answers = self.source.lookup_each(keys)  # type: ignore[attr-defined]
            async with contextlib.aclosing(answers):
                async for found in answers:
                    part = [key for key in found if key in left]
                    for key in part:
                        del left[key]
                    if len(part) != len(found):  # keys answered twice, or never asked
                        found = {key: found[key] for key in part}
                    if part:
                        self._deliver(part, found)
        except Exception as exc:
            error = exc
        clock = self._clock
        assert clock is not None
        self.metrics.latency.record(clock.now() - started)
        if not left:
            return
        if error is None:
            self._deliver(list(left), {})
        else:
            self._fail_keys(list(left), error)

    def _fail_keys(self, keys: list[Any], error: Exception) -> None:
        for key in keys:
            self._answer(key, None, error)
        self._release_touched()
        self._schedule_flush()  # retries due now, if any

    def _deliver(self, keys: list[Any], found: Mapping[Any, Any]) -> None:
        """Hand the answers of ``keys`` (absent from ``found``: a miss) to their rows."""
        clock = self._clock
        assert clock is not None
        if self.retry is not None:
            for key in keys:
                self._settle(key, found.get(key))
            self._release_touched()
            self._schedule_flush()  # retries due now, if any
            return
        # The common case, kept tight: no retries to consider.
        store = self._store
        if store is None and _all_single_rows(found):
            self._answer_in_bulk(keys, found)
            self._release_touched()
            return
        waiting = self._waiting
        get = found.get
        pop = waiting.pop
        touched = self._touched
        now = clock.now()
        for key in keys:
            answer = get(key)
            if type(answer) is not tuple:
                self._settle(key, answer)
                continue
            if store is not None:
                store.put(key, answer, now)
            waiters = pop(key, None)
            for chunk in (waiters,) if type(waiters) is _Chunk else waiters or ():
                if not chunk.done:
                    chunk.answers[key] = answer
                    chunk.remaining -= 1
                    if chunk.remaining == 0:
                        self._finish(chunk)
                    elif chunk.releases:
                        touched.append(chunk)
        self._release_touched()

    def _answer_in_bulk(self, keys: list[Any], found: Mapping[Any, Any]) -> None:
        """Every answer is a single row or a miss: hand them to the waiting chunks in bulk.

        A chunk may receive answers for keys it does not hold; it never reads them.
        """
        waiters = list(map(self._waiting.pop, keys, repeat(None)))
        if set(map(type, waiters)) <= _ONE_WAITER:
            answers = dict.fromkeys(keys, MISS)
            answers.update(found)
            simple = len(found) == len(keys)
            for chunk, count in Counter(waiters).items():
                if chunk is None or chunk.done:
                    continue
                chunk.answers.update(answers)
                if not simple:
                    chunk.simple = False
                chunk.remaining -= count
                if chunk.remaining == 0:
                    self._finish(chunk)
                elif chunk.releases:
                    self._touched.append(chunk)
            return
        # Some key has several chunks waiting for it: settle key by key.
        for key, owner in zip(keys, waiters, strict=True):
            answer = found.get(key, MISS)
            for chunk in (owner,) if type(owner) is _Chunk else owner or ():
                if chunk.done:
                    continue
                chunk.answers[key] = answer
                if answer is MISS:
                    chunk.simple = False
                chunk.remaining -= 1
                if chunk.remaining == 0:
                    self._finish(chunk)
                elif chunk.releases:
                    self._touched.append(chunk)

    def _settle(self, key: Any, answer: Any) -> None:
        if isinstance(answer, BaseException):
            self._answer(key, None, answer)
            return
        try:
            rows = as_rows(answer)
        except TypeError as exc:  # the source broke its contract: asking again won't help
            error = LookupFailed(str(exc), key=key, kind="answer", retryable=False)
            self._answer(key, None, error)
        else:
            self._answer(key, rows, None)

    def _answer(self, key: Any, rows: Any, error: BaseException | None) -> None:
        """Settle ``key`` for every chunk waiting for it, or schedule its retry for the
        chunks whose deadline the retry starts before (the others keep this outcome)."""
        waiters = self._waiting.get(key)
        live = [waiters] if type(waiters) is _Chunk else list(waiters or ())
        live = [chunk for chunk in live if not chunk.done]
        if not live:
            self._forget(key)
            return
        staying = self._retry_for(key, rows, error, live)
        if staying:
            self._waiting[key] = staying[0] if len(staying) == 1 else staying
            live = [chunk for chunk in live if chunk not in staying]
            if not live:
                return
        else:
            self._forget(key)
        store = self._store
        if error is not None:
            if store is not None and not staying:
                store.failed()
            outcome: Any = Failed(error)
        else:
            if store is not None and not staying:
                store.put(key, rows, self._clock.now())  # type: ignore[union-attr]
            outcome = rows
        fail_now = error is not None and self.on_error == "fail"
        simple = type(outcome) is tuple
        for chunk in live:
            if chunk.done:
                continue
            if fail_now:  # no need to wait for the chunk's other keys: the run fails
                self._finish(chunk, error)
                continue
            chunk.answers[key] = outcome
            if not simple:
                chunk.simple = False
            chunk.remaining -= 1
            if chunk.remaining == 0:
                self._finish(chunk)
            elif chunk.releases:
                self._touched.append(chunk)

    def _forget(self, key: Any) -> None:
        """Nobody waits for ``key`` any more: drop its bookkeeping and pending retry."""
        self._waiting.pop(key, None)
        self._attempts.pop(key, None)
        timer = self._retry_timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _retry_for(
        self, key: Any, rows: Any, error: BaseException | None, waiters: list[_Chunk]
    ) -> list[_Chunk]:
        """Schedule another call for ``key`` if the policy wants one; returns the chunks
        that wait for it (those whose deadline comes after the retry starts)."""
        retry = self.retry
        if retry is None:
            return []
        attempt = self._attempts.get(key, 1)
        if attempt >= retry.max_attempts:
            return []
        if error is not None:
            again = retry.should_retry_exception(error)
        else:
            again = rows is MISS and retry.should_retry_result(_MISS_RESULT)
        if not again:
            return []
        clock = self._clock
        assert clock is not None
        when = retry.retry_at(attempt, clock.now(), error)
        staying = [chunk for chunk in waiters if retry.starts_in_time(when, chunk.deadline)]
        if not staying:
            return []  # it would start after every deadline: the last outcome stands
        self.metrics.retries += 1

        def fire() -> None:
            self._retry_timers.pop(key, None)
            if self._waiting.get(key):
                self._pending.append(key)
                self._schedule_flush()

        self._retry_timers[key] = clock.call_at(when, fire)
        return staying

    # -- rows out ------------------------------------------------------------------------

    def _release_touched(self) -> None:
        """Let the answered rows of the chunks that got answers leave (UNORDERED)."""
        touched = self._touched
        if not touched:
            return
        self._touched = []
        for chunk in dict.fromkeys(touched):
            if not chunk.done and chunk.remaining:
                self._release(chunk)

    def _release(self, chunk: _Chunk) -> None:
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
            self._chunks.pop(chunk.ident, None)
            self._leave_waiting(chunk)
            chunk.result.complete_exceptionally(exc)
            return
        chunk.result.release([joined], len(rows))

    def _leave_waiting(self, chunk: _Chunk) -> None:
        """The chunk is finished: it no longer waits for its unanswered keys, so a
        request it shared goes on for the other chunks only, with their deadlines."""
        waiting = self._waiting
        answers = chunk.answers
        for key in dict.fromkeys(chunk.keys):
            if key in answers:
                continue
            waiters = waiting.get(key)
            if waiters is chunk:
                self._forget(key)
            elif type(waiters) is list and chunk in waiters:
                waiters.remove(chunk)
                if not waiters:
                    self._forget(key)

    def timeout(self, value: Any, result: ResultFuture) -> None:
        """The chunk's deadline passed: its unanswered keys time out, row by row."""
        chunk = self._chunks.get(id(value))
        if chunk is None:  # pragma: no cover - finished in the same instant
            return
        self._leave_waiting(chunk)
        timeout = self._timeout if self._timeout is not None else float("nan")
        answers = chunk.answers
        for key in dict.fromkeys(chunk.keys):
            if key not in answers:
                attempts = self._attempts.get(key, 1)
                answers[key] = Failed(LookupTimeout(key, timeout, attempts))
        chunk.simple = False
        chunk.remaining = 0
        chunk.result = result  # the operator only accepts the timeout's own completion
        self._finish(chunk)

    def _finish(self, chunk: _Chunk, error: BaseException | None = None) -> None:
        """Complete the chunk's record with its rows' outcomes, in row order."""
        chunk.done = True
        self._chunks.pop(chunk.ident, None)
        if error is not None:
            self._leave_waiting(chunk)
            self.metrics.errors[error_kind(error)] += 1
            chunk.result.complete_exceptionally(error)
            return
        rows = None
        if chunk.unreleased is not None:  # some rows left early: the others leave now
            rows = sorted(i for indices in chunk.unreleased.values() for i in indices)
        try:
            joined = self._assemble(chunk, rows)
        except BaseException as exc:
            chunk.result.complete_exceptionally(exc)
        else:
            chunk.result.complete([joined])

    def _assemble(self, chunk: _Chunk, rows: list[int] | None = None) -> JoinedChunk:
        return assemble(
            chunk.tag,
            chunk.keys,
            chunk.answers,
            chunk.simple,
            self.how,
            self.on_error,
            self.metrics,
            rows,
        )


class _MissMarker(list):  # type: ignore[type-arg]
    is_miss = True


_MISS_RESULT = _MissMarker()


_ONE_WAITER = {_Chunk, type(None)}


def _all_single_rows(found: Mapping[Any, Any]) -> bool:
    """Whether every answer of a call is one row (misses are simply absent)."""
    kinds = set(map(type, found.values()))
    return not kinds or kinds == {tuple}


def _scope(source: LookupSource) -> Any:
    """What tells one source from another for a shared cache: its settings."""
    try:
        hash(source)
        return (type(source).__qualname__, source)
    except TypeError:
        return (type(source).__qualname__, repr(source))
