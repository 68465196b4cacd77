"""The job-wide limiter of one process: permits drawn in batches from a bucket in Redis.

The bucket is a GCRA (generic cell rate algorithm, a token bucket kept as one
"theoretical arrival time") run by one Lua script on the limiter's Redis, so every
process of every executor draws from the same budget, atomically, with the server's
clock. A process asks for ``JobRateLimit.batch`` permits at a time (a hundredth of a
second's worth of the rate) and spends them locally: a request that finds a permit in
hand costs a decrement, not a round trip.

Guarantees:

* Over any interval of ``t`` seconds the job starts at most
  ``rate * (t + burst_seconds) + processes * batch`` requests while the limiter's
  Redis answers (the bucket grants at most ``rate * (t + burst_seconds)``; each process
  may hold one batch granted and unspent).
* A lookup never fails because of the limiter: when its Redis cannot be reached (a
  connection error, no answer within 0.25 s, an error reply), the process logs one
  warning per outage and keeps to ``fallback_rate`` (default ``rate / 8``) from a local
  token bucket, at every moment of the outage: the bucket hands out at most a batch at a
  time (``min(batch, fallback_rate / 10)``, at least one permit), paced, never a whole
  waiting demand at once, and between two batches the process asks Redis again once
  ``RETRY_REDIS_AFTER`` (1 s) has passed since its last failure, so it uses Redis again
  within about a second of its return. While the outage lasts the job's total is at
  most ``processes * (fallback_rate * t + batch)`` over any ``t`` seconds, plus the
  permits each process held from Redis when it began (at most ``rate * burst_seconds``):
  pick ``fallback_rate`` for the number of processes you run.
* Waiting for a permit is back-pressure, not a slow store: the wait is marked on the
  waiting work's :class:`~enrich.engine.mailbox.hold.Hold` (when its owner set one), so a join's
  timeout does not count it.
* Callers are served in the order they asked; one task per process asks the limiter's
  Redis, for what all waiting callers need together (at least a batch).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from dataclasses import dataclass
from typing import Any

from ..engine.clock import Clock, LoopClock
from ..engine.mailbox.hold import held_back
from .bucket import TokenBucket
from .job_rate import DEFAULT_LIMITER_TIMEOUT, JobRateLimit
from .loop_local import loop_resource, pop_loop_resource
from .masking import mask_url

_log = logging.getLogger("enrich.protect")
_REGISTRY = "enrich.protect"
# After a failed call to the limiter's Redis, the local fallback serves this long.
RETRY_REDIS_AFTER = 1.0
# The fallback hands out at most this many seconds' worth of its rate at once.
FALLBACK_BATCH_SECONDS = 0.1

# KEYS[1]: the bucket. ARGV: microseconds per permit, burst in microseconds, permits
# wanted. Returns {granted, microseconds until one more permit (when none granted)}.
# Times are integers of microseconds of the server's clock: exact in a double.
GCRA = """
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local room = math.floor((now + burst - tat) / interval)
if room <= 0 then
  return {0, math.ceil(tat + interval - burst - now)}
end
local granted = math.min(want, room)
tat = tat + granted * interval
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX',
           math.ceil((tat - now + burst) / 1000) + 1000)
return {granted, 0}
"""


@dataclass(frozen=True)
class LimiterStatistics:
    """What a process's limiter did: permits from Redis, from the fallback, and the
    outages of its Redis (each counted once, however long it lasted)."""

    granted: int
    fallback: int
    outages: int


class JobLimiter:
    """One process's share of a :class:`JobRateLimit`, on one event loop (see the module
    docstring for the guarantees)."""

    def __init__(
        self,
        settings: JobRateLimit,
        loop: asyncio.AbstractEventLoop,
        *,
        clock: Clock | None = None,
        client: Any = None,
    ) -> None:
        assert settings.redis_url is not None and settings.key is not None
        self.loop = loop
        self.settings = settings
        self._clock = clock or LoopClock(loop)
        self._client = client
        self._script: Any = None
        self._permits = 0
        self._waiting: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self._demand = 0
        self._drawer: asyncio.Task[None] | None = None
        fallback = settings.per_process_fallback
        self._fallback_batch = max(1, min(settings.batch, int(fallback * FALLBACK_BATCH_SECONDS)))
        self._fallback = TokenBucket(fallback, self._fallback_batch)
        self._redis_after = float("-inf")
        self._in_outage = False
        self._granted = self._from_fallback = self._outages = 0
        self._interval_us = 1e6 / settings.rate
        self._burst_us = settings.burst_seconds * 1e6

    async def acquire(self, permits: int = 1) -> None:
        """Wait until ``permits`` may be spent; never raises for the limiter's sake."""
        if self._permits >= permits and not self._waiting:
            self._permits -= permits
            return
        waiter = self.loop.create_future()
        self._waiting.append((permits, waiter))
        self._demand += permits
        if self._drawer is None:
            self._drawer = self.loop.create_task(self._serve())
        began = self._clock.now()
        try:
            with held_back():
                await waiter
        finally:
            _tally(self.settings, self._clock.now() - began)

    def statistics(self) -> LimiterStatistics:
        return LimiterStatistics(self._granted, self._from_fallback, self._outages)

    async def aclose(self) -> None:
        if self._drawer is not None:
            self._drawer.cancel()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _serve(self) -> None:
        # The one task drawing permits: it asks for what the waiters need together (at
        # least a batch), so a crowd of callers costs one round trip, not one each.
        try:
            while self._hand_out():
                await self._draw(max(self.settings.batch, self._demand - self._permits))
        finally:
            self._drawer = None

    def _hand_out(self) -> bool:
        """Serve waiters in order from the permits in hand; whether some still wait."""
        waiting = self._waiting
        while waiting:
            permits, waiter = waiting[0]
            if waiter.done():  # cancelled while waiting: it needs nothing any more
                waiting.popleft()
                self._demand -= permits
            elif self._permits >= permits:
                waiting.popleft()
                self._demand -= permits
                self._permits -= permits
                waiter.set_result(None)
            else:
                return True
        return False

    async def _draw(self, wanted: int) -> None:
        """Add up to ``wanted`` permits to the ones in hand, or wait as the bucket says
        (the caller loops while permits are wanted)."""
        clock = self._clock
        if clock.now() >= self._redis_after:
            try:
                granted, wait_us = await self._ask(wanted)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure of the limiter's store: fall back
                self._redis_failed(exc)
            else:
                if self._in_outage:
                    self._in_outage = False
                    _log.warning(
                        "job rate limit: the limiter's Redis %s answers again",
                        mask_url(self.settings.redis_url or "", keep_user=True),
                    )
                self._granted += granted
                self._permits += granted
                if not granted:
                    await clock.sleep(wait_us / 1e6)
                return
        # The fallback: a batch at most, taken only once the bucket holds it, so the
        # permits go out paced; a wait ends early when Redis is due to be asked again.
        batch = min(wanted, self._fallback_batch)
        wait = self._fallback.take(batch, clock.now())
        if not wait:
            self._from_fallback += batch
            self._permits += batch
            return
        await clock.sleep(max(0.0, min(wait, self._redis_after - clock.now())))

    def _redis_failed(self, exc: Exception) -> None:
        self._redis_after = self._clock.now() + RETRY_REDIS_AFTER
        if self._in_outage:
            return
        self._in_outage = True
        self._outages += 1
        _log.warning(
            "job rate limit: the limiter's Redis %s failed (%s: %s); keeping to "
            "%g permits/s in this process, asking it again every %g s",
            mask_url(self.settings.redis_url or "", keep_user=True),
            type(exc).__name__,
            exc,
            self.settings.per_process_fallback,
            RETRY_REDIS_AFTER,
        )

    async def _ask(self, wanted: int) -> tuple[int, int]:
        if self._script is None:
            if self._client is None:
                import redis.asyncio as aioredis  # the redis extra: needed only here

                self._client = aioredis.Redis.from_url(
                    self.settings.redis_url or "",
                    socket_timeout=DEFAULT_LIMITER_TIMEOUT,
                    socket_connect_timeout=DEFAULT_LIMITER_TIMEOUT,
                    max_connections=4,
                )
            self._script = self._client.register_script(GCRA)
        reply = await self._script(
            keys=[self.settings.key], args=[self._interval_us, self._burst_us, wanted]
        )
        return int(reply[0]), int(reply[1])


# Waits for permits in this process, by settings: (waits, seconds), taken by the joins'
# metrics (take_waits) from any thread.
_waits: dict[JobRateLimit, tuple[int, float]] = {}
_waits_lock = threading.Lock()


def _tally(settings: JobRateLimit, seconds: float) -> None:
    with _waits_lock:
        count, total = _waits.get(settings, (0, 0.0))
        _waits[settings] = (count + 1, total + seconds)


def take_waits(settings: JobRateLimit | None) -> tuple[int, float]:
    """The waits for permits of ``settings`` in this process (how many, and their
    seconds) since the last call: each is reported once, by whoever takes it first."""
    if settings is None:
        return 0, 0.0
    with _waits_lock:
        return _waits.pop(settings, (0, 0.0))


def limiter_for(settings: JobRateLimit) -> JobLimiter:
    """This process's limiter for ``settings`` on the running loop (opened on first use;
    equal settings share one)."""
    return loop_resource(_REGISTRY, settings, lambda loop: JobLimiter(settings, loop))


async def close_limiter(settings: JobRateLimit) -> None:
    """Close and forget the running loop's limiter for ``settings``, if there is one."""
    limiter = pop_loop_resource(_REGISTRY, settings)
    if limiter is not None:
        await limiter.aclose()
