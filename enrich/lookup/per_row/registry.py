"""The lookup join's registry: the chunks in flight and the keys they wait for.

A key is waited for by one chunk (the common case, stored bare) or by several (a list):
rows of any chunk whose key is already pending or in flight wait for that one request.
The registry also counts the calls made for each key still waited for, and holds its
pending retry. A key nobody waits for any more is forgotten at once: its count is
dropped and its retry timer cancelled, so a retry is never made for nobody.

It is plain data on the loop thread: no asyncio, no locks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any

from ...engine.clock import Clock, Timer
from ...engine.function import ResultFuture


class Chunk:
    """A chunk in flight: the answer of each of its distinct keys, and how many of its
    keys are still unanswered. Rows share their key's answer. A chunk that may release
    its rows early (UNORDERED) keeps the rows not released yet, by key."""

    __slots__ = (
        "answers",
        "deadline",
        "done",
        "held_at",
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
        self.held_at = 0.0  # the run's held time at admission (see enrich.engine.mailbox.hold)
        self.done = False
        self.answers: dict[Any, Any] = {}
        self.remaining = 0  # distinct keys not answered yet
        self.simple = True  # every answer so far is a single row (the fast case)
        self.releases = result.can_release
        self.unreleased: dict[Any, list[int]] | None = None  # after a first release


class Registry:
    """Keys -> the chunks waiting for them, the calls made for them, their retry timers.

    ``waiting`` maps a key to its one chunk, or to a list of chunks. The join's
    admission reads and fills it directly, and the settling of single-row answers
    with a cache pops from it: those loops run per key, where a method call per key
    would be a large share of the work (see ``./scripts/dev bench lookup``).
    Everything else goes through the methods.
    """

    __slots__ = ("attempts", "timers", "waiting")

    def __init__(self) -> None:
        self.waiting: dict[Any, Any] = {}
        self.attempts: dict[Any, int] = {}  # calls made for a key still waited for
        self.timers: dict[Any, Timer] = {}  # a key's pending retry

    def join(self, key: Any, waiters: Any, chunk: Chunk) -> None:
        """``chunk`` waits too for ``key``, which ``waiters`` (a chunk or a list) wait for."""
        if type(waiters) is Chunk:
            self.waiting[key] = [waiters, chunk]
        else:
            waiters.append(chunk)

    def wait_all(self, chunk: Chunk, distinct: dict[Any, None]) -> int:
        """``chunk`` waits for every key of ``distinct``. The keys already waited for are
        removed from ``distinct`` (they are in flight or pending already), which is left
        with the keys to request; returns how many were removed."""
        waiting = self.waiting
        joined = 0
        for key in distinct.keys() & waiting.keys():
            del distinct[key]
            self.join(key, waiting[key], chunk)
            joined += 1
        waiting.update(zip(distinct, repeat(chunk)))
        return joined

    def pop_all(self, keys: Iterable[Any]) -> list[Any]:
        """The waiters of each key (a chunk, a list or None), no longer registered."""
        return list(map(self.waiting.pop, keys, repeat(None)))

    def live(self, key: Any) -> list[Chunk]:
        """The chunks still waiting for ``key`` (not finished)."""
        waiters = self.waiting.get(key)
        live = [waiters] if type(waiters) is Chunk else list(waiters or ())
        return [chunk for chunk in live if not chunk.done]

    def keep(self, key: Any, chunks: list[Chunk]) -> None:
        """Only ``chunks`` (at least one) wait for ``key`` from now on."""
        self.waiting[key] = chunks[0] if len(chunks) == 1 else chunks

    def count_attempts(self, keys: Iterable[Any]) -> None:
        """A call is made for each of ``keys``."""
        attempts = self.attempts
        for key in keys:
            attempts[key] = attempts.get(key, 0) + 1

    def attempt(self, key: Any) -> int:
        """Calls made for ``key`` so far (1 when they were not counted)."""
        return self.attempts.get(key, 1)

    def schedule_retry(
        self, key: Any, when: float, clock: Clock, again: Callable[[Any], None]
    ) -> None:
        """Call ``again(key)`` at ``when``, if some chunk still waits for the key then."""

        def fire() -> None:
            self.timers.pop(key, None)
            if self.waiting.get(key):
                again(key)

        self.timers[key] = clock.call_at(when, fire)

    def forget(self, key: Any) -> None:
        """Nobody waits for ``key`` any more: drop its bookkeeping and pending retry."""
        self.waiting.pop(key, None)
        self.attempts.pop(key, None)
        timer = self.timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def leave(self, chunk: Chunk) -> None:
        """The chunk is finished: it no longer waits for its unanswered keys, so a
        request it shared goes on for the other chunks only, with their deadlines."""
        waiting = self.waiting
        answers = chunk.answers
        for key in dict.fromkeys(chunk.keys):
            if key in answers:
                continue
            waiters = waiting.get(key)
            if waiters is chunk:
                self.forget(key)
            elif type(waiters) is list and chunk in waiters:
                waiters.remove(chunk)
                if not waiters:
                    self.forget(key)

    def clear(self) -> None:
        """Forget everything, cancelling every pending retry."""
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()
        self.waiting.clear()
        self.attempts.clear()
