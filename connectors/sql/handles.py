"""What a relational connector's per-loop pool handle shares with the other's.

A driver's ``pool`` module keeps one handle per settings, process and loop (opened lazily
by :func:`enrich.spi.loop_resource`; equal sources of a process share it). This module
holds the driver-neutral part of it:

* :class:`Protections` -- the store protections around every statement: the job-wide
  rate limit's share (``job_rate_limit``, taken before the statement) and the adaptive
  limit's slots (``concurrency="auto"``: a slot held while the statement runs, its
  latency sampled, a timeout counted as throttling, the slots resized to the new limit);
* :class:`SqlHandle` -- the handle's base: its settings, protections and the plans read
  from the table once per schema (under a lock, the pool started first);
* :class:`HandleRegistry` -- a driver's handles by settings on the running loop, and the
  key of each pool's adaptive limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from enrich.spi import (
    AdaptiveLimit,
    JobLimiter,
    Schema,
    Slots,
    limiter_for,
    loop_resource,
    pop_loop_resource,
    process_limit,
)

from .settings import SqlSettings

__all__ = ("HandleRegistry", "Protections", "SqlHandle")

T = TypeVar("T")
P = TypeVar("P")
H = TypeVar("H", bound="SqlHandle[Any]")


@dataclass(eq=False)
class Protections:
    """The protections of one handle's statements (none, either or both).

    Attributes:
        adaptive: the process's adaptive limit for the pool (``concurrency="auto"``).
        slots: the statements in flight under that limit.
        job_limiter: this process's share of the job-wide rate limit.
    """

    adaptive: AdaptiveLimit | None = None
    slots: Slots | None = None
    job_limiter: JobLimiter | None = None

    @classmethod
    def of(cls, settings: SqlSettings, adaptive_key: tuple[str, SqlSettings]) -> Protections:
        """The protections ``settings`` ask for; the adaptive limit under ``adaptive_key``
        (shared by the process's handles of equal settings)."""
        protections = cls()
        if settings.concurrency == "auto":
            protections.adaptive = process_limit(adaptive_key, settings.pool_size)
            protections.slots = Slots(protections.adaptive.limit)
        if settings.job_rate_limit is not None:
            protections.job_limiter = limiter_for(settings.job_rate_limit)
        return protections

    async def run(
        self,
        keys: int,
        statement: Callable[[], Awaitable[T]],
        *,
        timeouts: tuple[type[BaseException], ...],
    ) -> T:
        """``statement()`` for ``keys`` keys, under the protections.

        The rate limit's share is taken first; under an adaptive limit a slot is held
        while the statement runs, and its latency sampled (an error of ``timeouts``
        counted as throttling) whatever its outcome.
        """
        if self.job_limiter is not None:
            await self.job_limiter.acquire(keys)
        slots, adaptive = self.slots, self.adaptive
        if slots is None:
            return await statement()
        assert adaptive is not None
        if not slots.take():
            await slots.wait()
        started = time.perf_counter()
        timed_out = False
        try:
            return await statement()
        except timeouts:
            timed_out = True
            raise
        finally:
            slots.release_sampled(adaptive, time.perf_counter() - started, throttled=timed_out)


@dataclass(eq=False, kw_only=True)
class SqlHandle(Generic[P]):
    """A process's pool for one source's settings on one loop: the driver's subclass adds
    the pool, :meth:`_start` (opening it) and :meth:`_read_plan` (``P``: its plan)."""

    loop: asyncio.AbstractEventLoop
    settings: SqlSettings
    protections: Protections = field(default_factory=Protections)
    plans: dict[Schema, P] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def plan(self, schema: Schema) -> P:
        """The statements for ``schema``, read from the table on first use (the pool
        started first, once).

        Raises:
            whatever the driver raises (the caller translates it).
        """
        found = self.plans.get(schema)
        if found is not None:
            return found
        async with self._lock:
            await self._start()
            if schema not in self.plans:
                self.plans[schema] = await self._read_plan(schema)
        return self.plans[schema]

    async def _start(self) -> None:
        """Open the pool, if it is not open (called under the lock)."""
        raise NotImplementedError

    async def _read_plan(self, schema: Schema) -> P:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the pool's connections (waiting for none: lookups are short)."""
        raise NotImplementedError


class HandleRegistry(Generic[H]):
    """A driver's handles: one per settings, process and loop, made by ``open``.

    Args:
        name: the registry's name (the driver's package), the first part of every key.
        open: makes a handle for the settings on the loop (no I/O: the pool starts on
            the first plan).
    """

    def __init__(
        self, name: str, open: Callable[[SqlSettings, asyncio.AbstractEventLoop], H]
    ) -> None:
        self.name = name
        self._open = open

    def handle_for(self, settings: SqlSettings) -> H:
        """This process's handle for ``settings`` on the running loop, opened on first use."""
        return loop_resource(self.name, settings, lambda loop: self._open(settings, loop))

    def adaptive_key(self, settings: SqlSettings) -> tuple[str, SqlSettings]:
        """The key of a pool's adaptive limit in this process (see enrich.protect.adaptive)."""
        return (self.name, settings)

    def protections(self, settings: SqlSettings) -> Protections:
        """The protections of a new handle for ``settings`` (:meth:`Protections.of`)."""
        return Protections.of(settings, self.adaptive_key(settings))

    async def close_handle(self, settings: SqlSettings) -> None:
        """Close and forget the running loop's handle for ``settings``, if there is one."""
        handle = pop_loop_resource(self.name, settings)
        if handle is not None:
            await handle.aclose()
