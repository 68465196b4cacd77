"""Request slots: at most ``limit`` requests in flight per pool, with a free path that
neither awaits nor allocates.

``asyncio.Semaphore`` costs two coroutines and a scan of its waiters on every
``async with`` even when a slot is free, which is nearly always in a join whose capacity
matches ``max_connections``; at a few thousand requests per second those objects are
also what the garbage collector then walks while the requests are in flight.
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING

from ..engine.mailbox.hold import held_back

if TYPE_CHECKING:
    from .adaptive import AdaptiveLimit


class Slots:
    """A counting semaphore for one event loop.

    Guarantees: at most ``limit`` slots are held at once; a caller that has to wait gets
    a slot in the order it started waiting (a released slot goes to the longest waiter
    before any newcomer); a waiter cancelled while it waits holds no slot afterwards
    (a slot handed to it as it was cancelled passes on to the next waiter).

    Use ``take()`` and, only when it returns False, ``await wait()``; then ``release()``
    once, in a ``finally``.
    """

    __slots__ = ("_free", "_waiters", "limit")

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"limit must be > 0, got {limit}")
        self.limit = limit
        self._free = limit
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def take(self) -> bool:
        """Hold a slot now if one is free and nobody waits for one (True), else False."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def wait(self) -> None:
        """Wait for a slot; on return the caller holds it."""
        if self.take():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            with held_back():  # queued behind our own calls: not the store's time
                await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot while being cancelled: pass it on
            elif waiter in self._waiters:  # a release may have dropped it already
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Give back a held slot: to the longest waiter, else to the free count."""
        if self._free < 0:  # the limit was lowered below the slots held: keep it
            self._free += 1
            return
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def release_sampled(self, adaptive: AdaptiveLimit, seconds: float, *, throttled: bool) -> None:
        """Give back a slot held for a call that took ``seconds``: ``adaptive`` samples
        it (the calls in flight counted with this one), and the slots follow the limit
        it answers before the slot goes back."""
        limit = adaptive.sample(seconds, in_flight=self.in_use(), throttled=throttled)
        if limit != self.limit:
            self.resize(limit)
        self.release()

    def resize(self, limit: int) -> None:
        """Allow ``limit`` slots from now on. A higher limit hands the new slots to
        waiters at once; a lower one takes effect as held slots are released (none is
        taken back)."""
        if limit <= 0:
            raise ValueError(f"limit must be > 0, got {limit}")
        self._free += limit - self.limit
        self.limit = limit
        waiters = self._waiters
        while self._free > 0 and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                self._free -= 1
                waiter.set_result(None)

    def in_use(self) -> int:
        """Slots held now (handed to a waiter that has not resumed yet counts as held)."""
        return self.limit - self._free
