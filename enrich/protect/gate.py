"""The store's protections around a user's own calls (``enrich.spark.async_map``).

A connector protects its store inside its request: a permit of the job's rate limit,
then a slot of its (adaptive) concurrency limit. A user's function makes its requests
itself, so the operator's starter (``enrich.engine.mailbox.starter``) asks a
:class:`CallGate` before each call instead: the same permit, the same slots, the same
adaptive limit fed with each call's latency. A call waiting at the gate has not started,
so its row's timeout has not started either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from .adaptive import AdaptiveLimit, process_limit
from .job_rate import JobRateLimit
from .limiter import JobLimiter, limiter_for, take_waits
from .loop_local import loop_resource
from .slots import Slots

# Statuses by which a service says it is overloaded (as HTTP lookups read them).
THROTTLED_STATUSES = (429, 503)
CONCURRENCY_AUTO = "auto"


def is_throttled(error: BaseException | None) -> bool:
    """Whether a call's error says the service is overloaded: a timeout, a 429 or 503
    (an ``aiohttp.ClientResponseError``'s ``status``, a lookup error's ``kind``), or a
    ``Retry-After`` hint."""
    if error is None:
        return False
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        return True
    if getattr(error, "status", None) in THROTTLED_STATUSES:
        return True
    if getattr(error, "kind", None) in ("status:429", "status:503"):
        return True
    return getattr(error, "retry_after", None) is not None


class CallGate:
    """A permit of ``limiter`` (if any), then a slot of ``slots`` (if any), per call.

    Guarantees: at most ``slots.limit`` calls are between :meth:`enter` and
    :meth:`leave` at once; calls start at most at the job's rate; with ``adaptive``,
    each call's latency (and whether it was throttled) moves the slots' limit.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        limiter: JobLimiter | None,
        slots: Slots | None,
        adaptive: AdaptiveLimit | None,
    ) -> None:
        self.loop = loop
        self.limiter = limiter
        self.slots = slots
        self.adaptive = adaptive

    def rate_limit_waits(self) -> tuple[int, float]:
        """This process's waits for the job rate limit's permits since the last call."""
        return take_waits(None if self.limiter is None else self.limiter.settings)

    def adaptive_limit(self) -> AdaptiveLimit | None:
        """The adaptive limit the slots follow (``concurrency="auto"``), else None."""
        return self.adaptive

    async def enter(self) -> None:
        if self.limiter is not None:  # the budget first: no slot held while waiting
            await self.limiter.acquire(1)
        slots = self.slots
        if slots is not None and not slots.take():
            await slots.wait()

    def leave(self, seconds: float, error: BaseException | None) -> None:
        slots = self.slots
        if slots is None:
            return
        if self.adaptive is None:
            slots.release()
        else:
            slots.release_sampled(self.adaptive, seconds, throttled=is_throttled(error))


def gate_for(
    key: Hashable,
    *,
    name: str,
    concurrency: int | str | None,
    ceiling: int,
    job_rate_limit: JobRateLimit | None,
) -> CallGate | None:
    """This process's gate for the map ``key`` on the running loop (made on first use:
    every task of the process shares its permits, slots and limit), or None when
    neither protection is set.

    Args:
        key: the map's identity (one per ``async_map`` call).
        name: the map's name: with ``job_rate_limit``, the bucket's key derives from it
            (unless the setting names one), so a restarted job keeps its budget.
        concurrency: None, calls in flight at most, or "auto" (an adaptive limit).
        ceiling: the most an adaptive limit may allow (the map's capacity).
        job_rate_limit: the job's calls per second, with its Redis, or None.
    """
    if concurrency is None and job_rate_limit is None:
        return None

    def make(loop: asyncio.AbstractEventLoop) -> CallGate:
        limiter = None
        if job_rate_limit is not None:
            limiter = limiter_for(job_rate_limit.for_store(f"async_map {name}", None))
        slots = adaptive = None
        if concurrency == CONCURRENCY_AUTO:
            adaptive = process_limit(("async_map", key), ceiling)
            slots = Slots(adaptive.limit)
        elif isinstance(concurrency, int):
            slots = Slots(concurrency)
        return CallGate(loop, limiter, slots, adaptive)

    return loop_resource("enrich.protect.gate", (key, concurrency, job_rate_limit), make)
