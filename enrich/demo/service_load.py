"""The demo dimension service's load model: latency, a deterministic tail, a quota, a knee,
and what arrived.

Synchronous bookkeeping (:class:`Load`, :class:`Tail`) plus one coroutine,
the coroutine :func:`hold`, that every endpoint spends its latency in, so that the GETs, the batch
POSTs and the scoring endpoints count and slow down alike.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field

# p50/p99 are taken over the last this many requests: a service fed 10M rows keeps a
# bounded window, not a list of every latency it ever served.
LATENCY_WINDOW = 100_000
# A tail fraction is resolved to millionths of the requests.
_FRACTION_STEPS = 1_000_000
# Seeds the tail's hash apart from the scoring endpoint's (zlib.crc32's start value), so
# which rows are slow says nothing about their score.
_TAIL_SEED = 0x7A11


@dataclass(frozen=True, kw_only=True)
class Tail:
    """Which requests take ``slow_latency`` seconds instead of ``latency``.

    Deterministic, so that two runs (and two contenders of one run) meet the same slow
    requests: a GET's user id is slow when divisible by ``slow_every``; a request body
    (its canonical JSON, see :func:`enrich.demo.scoring.canonical`) is slow when its hash
    falls in the first ``slow_fraction`` of the hash space, or is divisible by
    ``slow_every`` (about one body in ``slow_every``). A GET's id also counts against
    ``slow_fraction`` through the hash of its decimal text.
    """

    latency: float = 0.0
    slow_latency: float = 0.0
    slow_every: int = 0
    slow_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.slow_fraction <= 1.0:
            raise ValueError(f"slow_fraction must be within [0, 1], got {self.slow_fraction}")
        if self.slow_every < 0:
            raise ValueError(f"slow_every must be >= 0, got {self.slow_every}")

    def _hashed_is_slow(self, text: bytes) -> bool:
        digest = zlib.crc32(text, _TAIL_SEED)
        if self.slow_every and digest % self.slow_every == 0:
            return True
        return digest % _FRACTION_STEPS < self.slow_fraction * _FRACTION_STEPS

    def is_slow_id(self, uid: int) -> bool:
        """Whether ``GET /users/{uid}`` takes the tail."""
        if self.slow_every and uid >= 0 and uid % self.slow_every == 0:
            return True
        return bool(self.slow_fraction) and self._hashed_is_slow(str(uid).encode())

    def is_slow_body(self, canonical: bytes) -> bool:
        """Whether a request of this canonical body takes the tail."""
        return bool(self.slow_every or self.slow_fraction) and self._hashed_is_slow(canonical)

    def of(self, slow: bool) -> float:
        """The base latency of a request (before the knee's)."""
        return self.slow_latency if slow else self.latency


@dataclass
class Load:
    """The service's load model and what it saw: a quota (requests per second, 0: none)
    and a knee (requests in flight, 0: none). Synchronous; ``now`` is passed in."""

    quota: float = 0.0
    knee: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    served: int = 0
    refused: int = 0
    # Rows the scoring endpoints answered (a batch counts its items) and of them the
    # ones that took the tail.
    rows: int = 0
    slow: int = 0
    buckets: Counter[int] = field(default_factory=Counter)
    # Seconds each held request took in the service (its wait, the knee's included).
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    _tokens: float = 0.0
    _last: float | None = None

    def admit(self, now: float) -> bool:
        """Whether a request arriving at ``now`` is within the quota (and count it)."""
        self.buckets[int(now * 10)] += 1
        if self.quota:
            burst = max(1.0, self.quota * 0.1)
            if self._last is None:
                self._tokens = burst
            else:
                self._tokens = min(burst, self._tokens + (now - self._last) * self.quota)
            self._last = now
            if self._tokens < 1:
                self.refused += 1
                return False
            self._tokens -= 1
        self.served += 1
        return True

    def latency(self, base: float) -> float:
        """The latency of a request starting now, given ``in_flight`` (itself included)."""
        if self.knee and self.in_flight > self.knee:
            return base * (self.in_flight / self.knee) ** 2
        return base

    def reset(self) -> None:
        """Forget what arrived (the quota's bucket and the requests in flight stay)."""
        self.peak_in_flight = self.in_flight
        self.served = self.refused = self.rows = self.slow = 0
        self.buckets.clear()
        self.latencies.clear()

    def stats(self) -> dict[str, object]:
        ordered = sorted(self.latencies)

        def quantile(q: float) -> float | None:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None

        return {
            "p50": quantile(0.5),
            "p99": quantile(0.99),
            "served": self.served,
            "refused": self.refused,
            "rows": self.rows,
            "slow": self.slow,
            "peak_in_flight": self.peak_in_flight,
            "buckets": {str(k): v for k, v in sorted(self.buckets.items())},
        }


async def hold(load: Load, base: float) -> None:
    """Wait out ``base`` seconds (grown past the knee) counted in flight, then record how
    long the request took."""
    load.in_flight += 1
    load.peak_in_flight = max(load.peak_in_flight, load.in_flight)
    started = time.monotonic()
    try:
        wait = load.latency(base)
        if wait:
            await asyncio.sleep(wait)
    finally:
        load.in_flight -= 1
        load.latencies.append(time.monotonic() - started)
