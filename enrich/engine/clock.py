"""Time as a dependency: the operator reads all time through a :class:`Clock`.

:class:`LoopClock` is the real clock of an asyncio loop. Tests inject
:class:`enrich.testing.FakeClock`, so timeouts, retry backoff and cache TTLs are exact and
need no sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    """A scheduled callback that can be cancelled (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic time in seconds, and callbacks at a given time.

    ``call_at`` is only called on the operator's loop thread, and callbacks run there.
    """

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer: ...

    async def sleep(self, delay: float) -> None: ...


class LoopClock:
    """The clock of a running asyncio loop (``loop.time()`` and ``loop.call_at``)."""

    __slots__ = ("_loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now(self) -> float:
        return self._loop.time()

    def call_at(self, when: float, callback: Callable[[], object]) -> Timer:
        return self._loop.call_at(when, callback)

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(delay)
