"""Between a record's admission and its call: a gate to pass, and a batch to fill.

Without either, the operator starts a record's call as it admits it. With a
:class:`Gate` (a rate limit's permit, a concurrency limit's slot) or batched calls
(``batch_size`` records per call), admitted records wait here, in the queue's order, and
the :class:`Starter` starts their calls as the gate lets them through and their batch
fills. A record's deadline starts with its first call, not with its admission: waiting
for the gate is back-pressure, not slowness of the function, so it never times a record
out. Retries pass the gate again (a retry is a call); their deadline keeps running.

Guarantees (each has a test):

* calls start in the order their records were admitted (retries in the order they
  became due), each record's call once per attempt;
* a call carries at most ``batch_size`` records; a record waits for its batch to fill at
  most ``batch_wait`` seconds, and not at all once the input has ended;
* a call starts only after ``gate.enter()`` returned, and ``gate.leave()`` is called
  once per call that started, when the last of its records' attempts ended (an answer,
  an error or a timeout), with the call's duration and its first error.

Runs on the operator's loop, like the operator.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Protocol

from ..clock import Clock, Timer
from .queue import Entry
from .timers import Group, Timers


class Gate(Protocol):
    """What each call of a function must pass before it starts.

    ``enter()`` returns when one call may start (a rate limit's permit, a concurrency
    limit's slot); ``leave(seconds, error)`` says that a call which entered has ended,
    how long it took and its error (None for an answer), so that a concurrency limit
    frees its slot and learns from the latency.
    """

    async def enter(self) -> None: ...

    def leave(self, seconds: float, error: BaseException | None) -> None: ...


class Call:
    """One call's records, and when it started (the gate's leave needs both)."""

    __slots__ = ("error", "pending", "started")

    def __init__(self, records: int, started: float) -> None:
        self.pending = records
        self.started = started
        self.error: BaseException | None = None


class Starter:
    """Starts the calls of admitted records through a gate, ``batch_size`` at a time."""

    def __init__(
        self,
        *,
        gate: Gate | None,
        batch_size: int,
        batch_wait: float,
        clock: Clock,
        timers: Timers,
        start: Callable[[list[Entry]], None],
        is_live: Callable[[Entry], bool],
    ) -> None:
        self._gate = gate
        self._size = batch_size
        self._wait = batch_wait
        self._clock = clock
        self._timers = timers
        self._start = start
        self._is_live = is_live
        self._waiting: deque[tuple[Entry, float]] = deque()  # (record, when it arrived)
        self._pump: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._timer: Timer | None = None
        self._flushing = False  # the input ended: partial batches go at once

    def add(self, entries: list[Entry]) -> None:
        """Records to start: new ones (no deadline yet) or retries (their deadline runs)."""
        now = self._clock.now()
        self._waiting.extend((entry, now) for entry in entries)
        if self._pump is None:
            self._wake = asyncio.Event()
            self._pump = asyncio.get_running_loop().create_task(self._run())
        else:
            self._poke()

    def flush(self) -> None:
        """The input ended: no batch waits for more records from now on."""
        self._flushing = True
        self._poke()

    def cancel(self) -> None:
        """The run is over: nothing more starts."""
        self._waiting.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None

    def has_timers(self) -> bool:
        return self._timer is not None

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _ready(self) -> bool:
        """Whether a call may be formed now: a full batch, the oldest record's wait is
        over, or the input ended."""
        waiting = self._waiting
        if len(waiting) >= self._size or self._flushing:
            return True
        return self._clock.now() >= waiting[0][1] + self._wait

    async def _run(self) -> None:
        assert self._wake is not None
        waiting = self._waiting
        while True:
            while not waiting or not self._ready():
                self._arm_wait()
                self._wake.clear()
                await self._wake.wait()
            if self._gate is not None:
                await self._gate.enter()
            records: list[Entry] = []
            while waiting and len(records) < self._size:
                entry = waiting.popleft()[0]
                if self._is_live(entry):
                    records.append(entry)
            if not waiting and self._timer is not None:
                self._timer.cancel()  # no record is left to wait for
                self._timer = None
            if not records:
                if self._gate is not None:  # nothing to call after all: give it back
                    self._gate.leave(0.0, None)
                continue
            self._go(records)

    def _arm_wait(self) -> None:
        """A timer for the oldest record's batch wait (none while one is set)."""
        if self._timer is not None or not self._waiting or self._size == 1:
            return
        when = self._waiting[0][1] + self._wait
        self._timer = self._clock.call_at(when, self._waited)

    def _waited(self) -> None:
        self._timer = None
        self._poke()

    def _go(self, records: list[Entry]) -> None:
        now = self._clock.now()
        fresh: Group | None = None
        call = Call(len(records), now) if self._gate is not None else None
        for entry in records:
            entry.call = call
            if entry.group is None:  # its first call: its deadline starts now
                if fresh is None:
                    fresh = self._timers.new_group()
                entry.group = fresh
                fresh.entries.append(entry)
                fresh.pending += 1
        if fresh is not None:
            self._timers.arm(fresh)
        self._start(records)

    def attempt_ended(self, entry: Entry, error: BaseException | None) -> None:
        """One attempt of ``entry`` ended (answer, error or timeout): when it was the
        last record of its call, the call leaves the gate."""
        call = entry.call
        if call is None or self._gate is None:
            return
        entry.call = None
        if error is not None and call.error is None:
            call.error = error
        call.pending -= 1
        if call.pending == 0:
            self._gate.leave(self._clock.now() - call.started, call.error)
