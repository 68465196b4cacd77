"""Timeouts against real servers that a busy machine cannot decide.

A test of timeouts against a real server wants two things at once: the slow keys time
out, and every other key gets its answer. With the real clock, a machine busy enough to
delay a fast answer past the timeout turns it into a timeout too. Here the timeout still
runs on the real clock, but its timer may only fire while no fast key is in flight:

- :class:`GatedClock` is the loop's own time; a timer that falls due while the gate is
  closed is held, and fires when the gate opens (a timer due while it is open fires on
  time);
- :class:`OpenWhileOnlySlow` wraps a source that hands answers over key by key
  (``lookup_each``): it closes the gate while any key other than the scripted slow ones is
  requested and not yet handed over to the join, and opens it once each has been.

So a slow machine can make such a test longer, never change its outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from typing import Any


class _GatedTimer:
    __slots__ = ("callback", "cancelled", "handle")

    def __init__(self, callback: Callable[[], object]) -> None:
        self.callback = callback
        self.cancelled = False
        self.handle: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        self.cancelled = True
        if self.handle is not None:
            self.handle.cancel()


class GatedClock:
    """Real (monotonic) time whose timers fire only while the gate is open.

    Used on the join's loop thread only, like any clock (``open``/``close`` too).
    """

    def __init__(self) -> None:
        self._open = True
        self._held: list[_GatedTimer] = []
        self.held_timers = 0  # how many timers had to wait for the gate (for asserts)

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], object]) -> _GatedTimer:
        timer = _GatedTimer(callback)
        loop = asyncio.get_running_loop()
        timer.handle = loop.call_later(max(0.0, when - self.now()), self._due, timer)
        return timer

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(delay)

    def open(self) -> None:
        self._open = True
        held, self._held = self._held, []
        for timer in held:
            self._due(timer)

    def close(self) -> None:
        self._open = False

    def _due(self, timer: _GatedTimer) -> None:
        # Fire after what is already ready on the loop (a request task that has not
        # made its first step yet would close the gate): check the gate then.
        asyncio.get_running_loop().call_soon(self._fire, timer)

    def _fire(self, timer: _GatedTimer) -> None:
        if timer.cancelled:
            return
        if not self._open:
            self.held_timers += 1
            self._held.append(timer)
            return
        timer.callback()


class OpenWhileOnlySlow:
    """``source``, keeping ``clock``'s gate open exactly while every key it was asked for
    and has not handed over yet is one of ``slow``.

    A key counts as handed over once the join has taken its answer (the generator is
    resumed after the join handled what it yielded). Only ``lookup_each`` is offered, so
    the join takes the per-row path and hands answers over key by key.
    """

    def __init__(self, source: Any, clock: GatedClock, slow: Collection[Any]) -> None:
        self.source = source
        self.schema = source.schema
        self._clock = clock
        self._slow = frozenset(slow)
        self._fast_in_flight: Counter[Any] = Counter()

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        found: dict[Any, Any] = {}
        async for part in self.lookup_each(keys):
            found.update(part)
        return found

    async def lookup_each(self, keys: Sequence[Any]) -> AsyncIterator[Mapping[Any, Any]]:
        fast = [key for key in keys if key not in self._slow]
        self._fast_in_flight.update(fast)
        if fast:
            self._clock.close()
        left = set(fast)
        try:
            async for found in self.source.lookup_each(keys):
                yield found
                # Resumed: the join has taken these answers.
                self._handed_over(left.intersection(found))
                left.difference_update(found)
        finally:
            self._handed_over(left)

    def _handed_over(self, keys: Collection[Any]) -> None:
        self._fast_in_flight.subtract(keys)
        self._fast_in_flight = +self._fast_in_flight  # drop the zeros
        if not self._fast_in_flight:
            self._clock.open()

    async def aclose(self) -> None:
        await self.source.aclose()
