"""One full cache's state in one process: the current snapshot, its loads, its timers.

A load builds a whole new :class:`~enrich.lookup.cache.snapshot.Snapshot` aside;
:class:`Dimension` then swaps it in with one assignment on the runtime loop, the thread
every lookup runs on, so a lookup reads one snapshot from start to end. One Dimension
serves every task of a process (it is a process-local resource, keyed by the cache and
the source): concurrent tasks wait for the same first load, and later ones, later
micro-batches included, read its snapshot until the reload is due.

A load is bounded by ``load_timeout`` on the injected clock. A lookup waiting for the
first load marks the wait as held back (:class:`~enrich.engine.mailbox.hold.held_back`),
so its row's deadline moves on meanwhile: a load's time is never a row's.

Schedules run on the injected :class:`~enrich.Clock` (``call_at``), so tests drive
reloads with ``FakeClock.advance`` and never sleep. Imports no pyspark.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pyarrow as pa

from ...engine.clock import Clock, Timer
from ...engine.mailbox.hold import held_back
from ..contract.lookup_source import ListableSource
from .full import FullCache, FullCacheStatistics, LoadTimedOut
from .snapshot import Snapshot, load_snapshot

log = logging.getLogger("enrich.lookup.cache.full")


class Dimension:
    """One full cache's state in one process: the current snapshot, its loads, timers.

    Guarantees: :attr:`snapshot` only ever changes by one assignment on the loop thread,
    to a complete snapshot; a failed load leaves it as it was, is logged and counted,
    and is tried again after ``retry_delay``; at most one load runs at a time.
    """

    def __init__(
        self,
        source: ListableSource,
        settings: FullCache,
        struct_type: pa.StructType,
        clock: Clock,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.source = source
        self.settings = settings
        self.struct_type = struct_type
        self.clock = clock
        self.wall = wall or time.time
        self.loop = asyncio.get_running_loop()
        self.snapshot: Snapshot | None = None
        self._task: asyncio.Task[None] | None = None
        self._timer: Timer | None = None
        self._started = False
        self._loads = 0
        self._failed = 0
        self._last_seconds: float | None = None
        self._last_error: BaseException | None = None

    async def current(self) -> Snapshot | None:
        """The snapshot to answer from. The first call starts the first load; under
        "eager" the calls wait for it (and raise its error if it fails), under "lazy"
        they get None (ask the store) until it is in."""
        if not self._started:
            self.reload()
        snapshot = self.snapshot
        if snapshot is not None or self.settings.initial_load == "lazy":
            return snapshot
        task = self._task
        if task is not None and not task.done():
            with held_back():  # the load's time is not the row's: its deadline moves on
                await asyncio.shield(task)
            snapshot = self.snapshot
        if snapshot is None:
            error = self._last_error
            assert error is not None
            raise error.with_traceback(None)
        return snapshot

    def reload(self) -> None:
        """Start a load now, unless one runs (on the loop thread)."""
        self._started = True
        self._cancel_timer()
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._load())

    async def wait_loaded(self) -> None:
        """Wait for the load running now, if any, to end (it may have failed: see
        :meth:`statistics`)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.shield(task)

    async def _load(self) -> None:
        clock = self.clock
        started = clock.now()
        version = (self.snapshot.version if self.snapshot is not None else 0) + 1
        try:
            snapshot = await self._bounded(
                load_snapshot(self.source, self.settings, self.struct_type, version, clock)
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed += 1
            self._last_error = exc
            kept = "the previous snapshot keeps serving" if self.snapshot else "no snapshot yet"
            log.warning(
                "full cache of %r: load failed (%s: %s); %s; next try in %gs",
                self.source,
                type(exc).__name__,
                exc,
                kept,
                self.settings.retry_delay,
            )
            self._schedule(clock.now() + self.settings.retry_delay)
            return
        self.snapshot = snapshot  # the swap: one assignment, on the loop thread
        self._loads += 1
        self._last_seconds = snapshot.loaded_at - started
        log.info(
            "full cache of %r: loaded version %d, %d keys, %d bytes read, %d bytes held, in %.3fs",
            self.source,
            version,
            snapshot.rows,
            snapshot.size,
            snapshot.nbytes(),
            self._last_seconds,
        )
        self._schedule(self.settings.next_reload(snapshot.loaded_at, self.wall()))

    async def _bounded(self, load: Coroutine[Any, Any, Snapshot]) -> Snapshot:
        """``load``'s snapshot, or :class:`LoadTimedOut` once ``load_timeout`` has passed
        on the clock (the load is cancelled then)."""
        work = self.loop.create_task(load)
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            work.cancel()

        bound = self.settings.load_timeout
        timer = self.clock.call_at(self.clock.now() + bound, expire)
        try:
            return await work  # cancelling this task (close) cancels the load too
        except asyncio.CancelledError:
            if not expired:
                raise
            raise LoadTimedOut(
                f"full cache of {self.source!r}: the load did not end within "
                f"load_timeout={bound:g}s; raise FullCache(load_timeout=...) if the store "
                "is healthy but slow"
            ) from None
        finally:
            timer.cancel()

    def _schedule(self, when: float | None) -> None:
        self._cancel_timer()
        if when is not None:
            self._timer = self.clock.call_at(when, self.reload)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """Stop reloading: cancel the timer and a running load."""
        self._cancel_timer()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def statistics(self) -> FullCacheStatistics:
        snapshot = self.snapshot
        error = self._last_error
        return FullCacheStatistics(
            loads=self._loads,
            failed_loads=self._failed,
            rows=snapshot.rows if snapshot is not None else 0,
            bytes=snapshot.size if snapshot is not None else 0,
            memory=snapshot.nbytes() if snapshot is not None else 0,
            version=snapshot.version if snapshot is not None else 0,
            last_load_seconds=self._last_seconds,
            age=self.clock.now() - snapshot.loaded_at if snapshot is not None else None,
            reloading=self._task is not None and not self._task.done(),
            last_error=f"{type(error).__name__}: {error}" if error is not None else None,
        )
