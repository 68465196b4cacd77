"""Deadlines and retry waits of an operator's records, on the injected clock.

Records admitted together share one deadline and one timer (they were admitted at the
same instant); records waiting for a retry that starts at the same time share one timer.
So a chunk of records costs one timer, whatever its size, and every timer is cancelled
as soon as nobody needs it: none is left once every admitted record has completed.

Runs on the operator's loop thread only, like the operator itself.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from ..clock import Clock, Timer

if TYPE_CHECKING:
    from .queue import Entry


class Group:
    """Records admitted together: one deadline (None without a timeout), one timer."""

    __slots__ = ("deadline", "entries", "pending", "timer")

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.entries: list[Entry] = []
        self.pending = 0  # records of the group not completed yet
        self.timer: Timer | None = None


class Timers:
    """The deadline timers of admission groups and the timers of retry waits.

    Guarantees: ``expire(group)`` is called once at the group's deadline, unless every
    record of the group completed before (then its timer is cancelled);
    ``restart(entries)`` is called once at the time a retry wait was scheduled for, with
    every entry scheduled for that time; :meth:`cancel_all` leaves no timer behind.
    """

    __slots__ = ("_clock", "_expire", "_live", "_restart", "_timeout", "_waits")

    def __init__(
        self,
        clock: Clock,
        timeout: float | None,
        expire: Callable[[Group], None],
        restart: Callable[[list[Entry]], None],
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._expire = expire
        self._restart = restart
        self._live: set[Group] = set()  # groups with records still pending
        self._waits: dict[float, tuple[list[Entry], Timer]] = {}

    def new_group(self) -> Group:
        """A group for records admitted now: its deadline is now plus the timeout."""
        if self._timeout is None:
            return Group(None)
        return Group(self._clock.now() + self._timeout)

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
        self._expire(group)

    def _fire_retries(self, when: float) -> None:
        entries, _ = self._waits.pop(when)
        self._restart(entries)
