"""The consumer's side of an operator run, as a state machine that never blocks.

Both iterators (:class:`~.wait.WaitIterator` on a thread, :class:`~.wait.AsyncWaitAsyncIterator`
on a loop) drive the same :class:`Consumer`; they differ only in how they wait (a
thread-safe queue, or an asyncio event) and in how an async input is awaited. So the
admission, the credit and the handling of the operator's messages are written once, as
anyio builds its blocking calls on ``_nowait`` methods.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

Weigh = Callable[[Any], int]

# Records handed to the loop in one go; bounds the latency of the first outputs.
MAX_CHUNK = 1024

_NOTHING: Any = object()


class Credit:
    """The capacity not in use, in units: what the consumer may still admit.

    A record weighs ``weigh(value)`` units (1 without ``weigh``). A record heavier than
    what is left waits until enough comes back, unless nothing is in flight (then it is
    admitted alone, so that a record heavier than the capacity cannot stall the run).
    """

    __slots__ = ("capacity", "left", "weigh")

    def __init__(self, capacity: int, weigh: Weigh | None) -> None:
        self.capacity = capacity
        self.left = capacity
        self.weigh = weigh

    def take(self, value: Any) -> bool:
        """Charge ``value`` if it fits now; False if it must wait for credit."""
        weight = self.weigh(value) if self.weigh is not None else 1
        if weight > self.left and self.left < self.capacity:
            return False
        self.left -= weight
        return True

    def give(self, units: int) -> None:
        self.left += units


class Consumer:
    """What to admit next and what came out, without ever waiting.

    Guarantees: no more than ``capacity`` units are admitted and not yet emitted; inputs
    are admitted in their order, each once; outputs are handed out in the order the
    operator emitted them, and the run's end ("done", or an error, raised) comes after
    every output emitted before it.

    A driver loops: admit :meth:`pull` (or :meth:`offer` for async inputs), post
    :meth:`finish_now` once, hand out :meth:`next_outputs`, and when there is nothing to
    hand out, wait for a message if :meth:`must_wait` and :meth:`receive` it.
    """

    __slots__ = (
        "_bulk",
        "_credit",
        "_finish_posted",
        "_held",
        "_most",
        "_outputs",
        "ended",
        "error",
        "exhausted",
    )

    def __init__(
        self, capacity: int, weigh: Weigh | None, *, most: int = MAX_CHUNK, overlap: bool = False
    ) -> None:
        self._credit = Credit(capacity, weigh)
        self._most = most
        # With ``overlap`` (a consumer on another thread than the operator), unweighted
        # admissions hold at most half the capacity, so that the operator has the next
        # chunk in hand while the consumer handles the outputs of the previous one: the
        # two threads then work side by side instead of waking each other in turn.
        self._bulk = max(1, min(most, capacity // 2)) if overlap else most
        self._held = _NOTHING  # an input waiting for credit
        self._outputs: deque[list[Any]] = deque()
        self._finish_posted = False
        self.exhausted = False  # the input has ended
        self.ended = False  # the run's last message came
        self.error: BaseException | None = None

    @property
    def weigh(self) -> Weigh | None:
        return self._credit.weigh

    def wants_input(self) -> bool:
        """Whether an input could be admitted now (there is credit, and no input held)."""
        return self._credit.left > 0 and not self.exhausted and self._held is _NOTHING

    def pull(self, source: Iterator[Any]) -> list[Any]:
        """The inputs to admit now, taken from ``source`` while the credit lasts."""
        credit = self._credit
        chunk: list[Any] = []
        if credit.left <= 0 or self.exhausted:
            return chunk
        if credit.weigh is None:  # every record weighs 1: take them in bulk
            want = min(credit.left, self._bulk)
            chunk = list(islice(source, want))
            self.exhausted = len(chunk) < want
            credit.left -= len(chunk)
            return chunk
        if self._held is not _NOTHING:
            if not credit.take(self._held):
                return chunk
            chunk.append(self._held)
            self._held = _NOTHING
        while len(chunk) < self._most and credit.left > 0:
            item = next(source, _NOTHING)
            if item is _NOTHING:
                self.exhausted = True
                break
            if not credit.take(item):
                self._held = item
                break
            chunk.append(item)
        return chunk

    def offer(self, item: Any) -> list[Any]:
        """One input that arrived (from an async source): the chunk to admit now, or
        nothing if it must wait for credit (then :meth:`retake` admits it later)."""
        if self._credit.take(item):
            return [item]
        self._held = item
        return []

    def retake(self) -> list[Any]:
        """The held input, if its credit came back."""
        held = self._held
        if held is not _NOTHING and self._credit.take(held):
            self._held = _NOTHING
            return [held]
        return []

    def end_input(self) -> None:
        self.exhausted = True

    def finish_now(self) -> bool:
        """True once, when the input has ended and the operator should be told."""
        if self.exhausted and not self._finish_posted and self._held is _NOTHING:
            self._finish_posted = True
            return True
        return False

    def must_wait(self) -> bool:
        """Whether nothing can be admitted before a message returns credit."""
        return self._credit.left <= 0 or self.exhausted or self._held is not _NOTHING

    def receive(self, message: tuple[Any, ...]) -> None:
        """Take in one message of the operator."""
        kind = message[0]
        if kind == "emit":
            self._credit.give(message[2])
            if message[1]:
                self._outputs.append(message[1])
        else:
            self.ended = True
            if kind == "fail":
                self.error = message[1]

    def next_outputs(self) -> list[Any] | None:
        """The next batch of outputs to hand out, or None when there is none now.

        Raises:
            BaseException: the run's error, once every output before it was handed out.
        """
        if self._outputs:
            return self._outputs.popleft()
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return None

    def is_over(self) -> bool:
        """Whether the run ended and every output was handed out."""
        return self.ended and not self._outputs and self.error is None
