"""Time held back by a rate limit: waiting for a permit is back-pressure, not a slow store.

A :class:`Hold` records the spells during which some work (a join's chunk, an operator's
run) waits for the permits of a rate limit. A :class:`Deadline` moves on by the time its
hold held the work back, so a timeout counts the time the work could run, never the time
a rate limit kept it waiting: a row that waits 30 s for its permit under a quota far
below the job's demand still has its whole timeout once its request may go.

Both are synchronous, on an injected clock. The work finds its hold through a context
variable that asyncio tasks inherit when they are created: whoever owns the deadline
sets it (:func:`set_hold`) where the work starts, and a limiter marks the spell
(:class:`held_back`) around its own waiting, without the hold being passed down through
the source's API. Work with no hold set waits as before; the limiter's mark costs nothing
then but a context-variable read.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from types import TracebackType

from ..clock import Clock

_current: contextvars.ContextVar[Hold | None] = contextvars.ContextVar("enrich_hold", default=None)


class Released:
    """A callback waiting for the end of a hold's spell; :meth:`cancel` drops it."""

    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], object]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Hold:
    """The spells during which some work waited for permits.

    Guarantees: :meth:`held` is the total time, up to now, during which at least one
    :meth:`begin` was not yet matched by its :meth:`end` (overlapping waits count once);
    the callbacks given to :meth:`when_released` run once, when the spell under way
    ends (at once if none is), unless cancelled. A hold with a ``parent`` (one request's
    hold inside its run's) marks every wait in the parent too.
    """

    __slots__ = ("_clock", "_parent", "_released", "_since", "_total", "_waiting")

    def __init__(self, clock: Clock, parent: Hold | None = None) -> None:
        self._clock = clock
        self._parent = parent
        self._waiting = 0
        self._since = 0.0
        self._total = 0.0
        self._released: list[Released] = []

    def begin(self) -> None:
        """A wait for permits starts."""
        if not self._waiting:
            self._since = self._clock.now()
        self._waiting += 1
        if self._parent is not None:
            self._parent.begin()

    def end(self) -> None:
        """A wait started by :meth:`begin` is over."""
        if self._parent is not None:
            self._parent.end()
        self._waiting -= 1
        if self._waiting:
            return
        self._total += self._clock.now() - self._since
        released, self._released = self._released, []
        for waiter in released:
            if not waiter.cancelled:
                waiter.callback()

    def is_held(self) -> bool:
        """Whether some wait is under way now."""
        return self._waiting > 0

    def held(self) -> float:
        """Seconds during which some wait was under way, up to now."""
        if self._waiting:
            return self._total + self._clock.now() - self._since
        return self._total

    def when_released(self, callback: Callable[[], object]) -> Released:
        """Call ``callback`` when the spell under way ends (at once when none is)."""
        waiter = Released(callback)
        if self._waiting:
            self._released.append(waiter)
        else:
            callback()
        return waiter


class Deadline:
    """A deadline ``seconds`` after now, moved on by the time ``hold`` holds the work
    back from now on (a plain deadline when ``hold`` is None)."""

    __slots__ = ("_at", "_held_at", "_hold")

    def __init__(self, now: float, seconds: float, hold: Hold | None) -> None:
        self._at = now + seconds
        self._hold = hold
        self._held_at = hold.held() if hold is not None else 0.0

    @property
    def hold(self) -> Hold | None:
        return self._hold

    def at(self) -> float:
        """When the deadline falls, as far as is known now (a spell under way counts up
        to now: it moves the deadline on as long as it lasts)."""
        if self._hold is None:
            return self._at
        return self._at + self._hold.held() - self._held_at

    def is_paused(self) -> bool:
        """Whether the work is held back now (its deadline moves on meanwhile)."""
        return self._hold is not None and self._hold.is_held()


def current_hold() -> Hold | None:
    """The hold of the work running in this context, if its owner set one."""
    return _current.get()


def set_hold(hold: Hold | None) -> contextvars.Token[Hold | None]:
    """Make ``hold`` the current work's hold in this context (and in the tasks it
    creates from now on); returns the token that :func:`reset_hold` takes."""
    return _current.set(hold)


def reset_hold(token: contextvars.Token[Hold | None]) -> None:
    """Undo a :func:`set_hold`."""
    _current.reset(token)


class held_back:
    """``with held_back():`` marks the current work's hold (if any) as held while the
    block runs: a rate limiter wraps its waiting for a permit in it."""

    __slots__ = ("_hold",)

    def __init__(self) -> None:
        self._hold = _current.get()

    def __enter__(self) -> None:
        if self._hold is not None:
            self._hold.begin()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._hold is not None:
            self._hold.end()
