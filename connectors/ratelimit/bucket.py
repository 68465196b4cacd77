"""A local token bucket: the fallback of the job-wide limit, a synchronous state machine."""

from __future__ import annotations


class TokenBucket:
    """At most ``rate`` permits per second after a burst of at most ``burst`` permits.

    Guarantees: over any interval of ``t`` seconds the permits taken and waited out add
    up to at most ``burst + rate * t``. A take that overdraws the bucket is granted with a
    wait (the caller sleeps it before going on), so permits are never refused and the
    order of callers is kept.
    """

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float) -> None:
        if not rate > 0 or not burst > 0:
            raise ValueError(f"rate and burst must be > 0, got {rate!r} and {burst!r}")
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._last: float | None = None

    def take(self, permits: int, now: float) -> float:
        """Take ``permits`` at time ``now``; returns the seconds to wait before using them."""
        if self._last is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= permits
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate
