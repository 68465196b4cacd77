"""Deadlines and retry waits of an operator's records, on the injected clock.

Records admitted together share one deadline and one timer (they were admitted at the
same instant); records waiting for a retry that starts at the same time share one timer.
So a chunk of records costs one timer, whatever its size, and every timer is cancelled
as soon as nobody needs it: none is left once every admitted record has completed.

With a :class:`~enrich.engine.mailbox.hold.Hold`, a deadline moves on by the time the run was
held back by a rate limit while the group was pending: waiting for a permit is
back-pressure, and never what times a record out.

Runs on the operator's loop thread only, like the operator itself.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from ..clock import Clock, Timer
from .hold import Hold

if TYPE_CHECKING:
    from .queue import Entry


class Group:
    """Records admitted together: one deadline (None without a timeout), one timer."""

    __slots__ = ("deadline", "entries", "held_at", "pending", "timer")

    def __init__(self, deadline: float | None, held_at: float = 0.0) -> None:
        self.deadline = deadline
        self.held_at = held_at  # the run's held time when the deadline was last set
        self.entries: list[Entry] = []
        self.pending = 0  # records of the group not completed yet
        self.timer: Timer | None = None


class Timers:
    """The deadline timers of admission groups and the timers of retry waits.

    Guarantees: ``expire(group)`` is called once at the group's deadline, unless every
    record of the group completed before (then its timer is cancelled); with a
    ``hold``, the deadline is the admission plus the timeout plus the time the hold
    held the run back since (it never falls while the run is held);
    ``restart(entries)`` is called once at the time a retry wait was scheduled for, with
    every entry scheduled for that time; :meth:`cancel_all` leaves no timer behind.
    """

    __slots__ = ("_clock", "_expire", "_hold", "_live", "_restart", "_timeout", "_waits")

    def __init__(
        self,
        clock: Clock,
        timeout: float | None,
        expire: Callable[[Group], None],
        restart: Callable[[list[Entry]], None],
        hold: Hold | None = None,
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._hold = hold
        self._expire = expire
        self._restart = restart
        self._live: set[Group] = set()  # groups with records still pending
        self._waits: dict[float, tuple[list[Entry], Timer]] = {}

    def new_group(self) -> Group:
        """A group for records admitted now: its deadline is now plus the timeout."""
        if self._timeout is None:
            return Group(None)
        held = self._hold.held() if self._hold is not None else 0.0
        return Group(self._clock.now() + self._timeout, held)

    def deadline(self, group: Group) -> float | None:
        """The group's deadline as far as is known now (held time moves it on)."""
        if group.deadline is None or self._hold is None:
            return group.deadline
        return group.deadline + self._hold.held() - group.held_at

    def arm(self, group: Group) -> None:
        """Start the group's deadline timer, if it has pending records and a deadline."""
        if group.pending:
            self._live.add(group)
            if group.deadline is not None:
                group.timer = self._clock.call_at(group.deadline, partial(self._fire, group))

    def settled(self, group: Group) -> None:
        """Every record of ``group`` completed: its deadline no longer matters."""
        self._live.discard(group)
        if group.timer is not None:
            group.timer.cancel()
            group.timer = None

    def wait_retry(self, entry: Entry, when: float) -> None:
        """Restart ``entry`` at ``when`` (sharing a timer with others due then)."""
        waiting = self._waits.get(when)
        if waiting is None:
            timer = self._clock.call_at(when, partial(self._fire_retries, when))
            self._waits[when] = ([entry], timer)
        else:
            waiting[0].append(entry)

    def has_timers(self) -> bool:
        """Whether any deadline or retry timer is still scheduled."""
        return any(g.timer is not None for g in self._live) or bool(self._waits)

    def cancel_all(self) -> list[Group]:
        """Cancel every timer; returns the groups that still had pending records."""
        groups = list(self._live)
        for group in groups:
            if group.timer is not None:
                group.timer.cancel()
                group.timer = None
        self._live.clear()
        for _, timer in self._waits.values():
            timer.cancel()
        self._waits.clear()
        return groups

    def _fire(self, group: Group) -> None:
        group.timer = None
        hold = self._hold
        if hold is not None and group.deadline is not None:
            if hold.is_held():  # the deadline moves on while the run is held back
                group.timer = hold.when_released(partial(self._fire_soon, group))
                return
            held = hold.held()
            if held > group.held_at:
                group.deadline += held - group.held_at
                group.held_at = held
                group.timer = self._clock.call_at(group.deadline, partial(self._fire, group))
                return
        self._expire(group)

    def _fire_soon(self, group: Group) -> None:
        # Called as the hold's spell ends, inside the limiter's wait: check the deadline
        # from the loop instead, at the time it ended.
        group.timer = self._clock.call_at(self._clock.now(), partial(self._fire, group))

    def _fire_retries(self, when: float) -> None:
        entries, _ = self._waits.pop(when)
        self._restart(entries)
