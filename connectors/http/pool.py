"""A process's live HTTP resources for one source on one loop: session, slots, throttle.

An aiohttp session belongs to the loop it was created on, so a pool is opened lazily on
the running loop and kept per loop by :class:`enrich.protect.loop_local.LoopLocal` (equal
sources share it).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from asyncio_throttle.throttler import Throttler

from enrich.spi import AdaptiveLimit, JobLimiter, Slots, limiter_for, process_limit

from .settings import Settings

# The throttle lets through at most a tenth of a second's worth of requests at once, so a
# rate limit is smooth at the scale a server notices, not one burst per second.
_BURST_WINDOW = 0.1


class Throttle(Protocol):
    """The part of ``asyncio_throttle.Throttler`` we use (the library has no annotations)."""

    async def acquire(self) -> None: ...


@dataclass(frozen=True)
class Pool:
    """A process's live resources for one source on one loop.

    Attributes:
        loop: the loop the session belongs to.
        session: the aiohttp session, carrying the configured headers and timeout.
        slots: at most ``max_connections`` requests in flight.
        throttler: at most ``rate_limit`` requests started per second, or None.
        adaptive: with ``concurrency="auto"``, the limit ``slots`` follow, else None.
        job_limiter: with ``job_rate_limit``, this process's share of it, else None.
    """

    loop: asyncio.AbstractEventLoop
    session: aiohttp.ClientSession
    slots: Slots
    throttler: Throttle | None
    adaptive: AdaptiveLimit | None = None
    job_limiter: JobLimiter | None = None

    @classmethod
    def open(cls, settings: Settings, loop: asyncio.AbstractEventLoop) -> Pool:
        # The semaphore matches the connector's limit so requests wait here, before the
        # timeout starts, rather than inside aiohttp where waiting counts against it.
        connector = aiohttp.TCPConnector(limit=settings.max_connections)
        session = aiohttp.ClientSession(
            connector=connector,
            headers=dict(settings.headers),
            timeout=aiohttp.ClientTimeout(total=settings.timeout),
        )
        throttler: Throttle | None = None
        if settings.rate_limit is not None:
            burst = max(1, math.floor(settings.rate_limit * _BURST_WINDOW))
            throttler = Throttler(rate_limit=burst, period=burst / settings.rate_limit)
        slots = Slots(settings.max_connections)
        adaptive = None
        if settings.concurrency == "auto":
            adaptive = process_limit(adaptive_key(settings), settings.max_connections)
            slots.resize(adaptive.limit)
        job_limiter = None
        if settings.job_rate_limit is not None:
            job_limiter = limiter_for(settings.job_rate_limit)
        return cls(loop, session, slots, throttler, adaptive, job_limiter)

    @staticmethod
    def is_open(pool: Pool) -> bool:
        """Whether the pool may serve (its session was not closed behind our back)."""
        return not pool.session.closed


def adaptive_key(settings: Settings) -> tuple[str, Settings]:
    """The key of a source's adaptive limit in this process (see enrich.protect.adaptive)."""
    return ("connectors.http", settings)
