"""A local token bucket: the fallback of the job-wide limit, a synchronous state machine."""

from __future__ import annotations


class TokenBucket:
    """At most ``rate`` permits per second after a burst of at most ``burst`` permits.

    Guarantees: over any interval of ``t`` seconds the permits taken add up to at most
    ``burst + rate * t``. A take is granted only from what the bucket holds now, never
    ahead of time: a caller told to wait takes nothing and asks again, so permits go out
    paced, a few at a time, however many callers wait (taking a whole waiting demand at
    once after one long sleep would send it all in the same instant).
    """

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float) -> None:
        if not rate > 0 or not burst >= 1:
            raise ValueError(f"rate must be > 0 and burst >= 1, got {rate!r} and {burst!r}")
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._last: float | None = None

    def take(self, permits: int, now: float) -> float:
        """Take ``permits`` (at most ``burst``) at ``now`` if the bucket holds them:
        returns 0.0; else take nothing and return the seconds until it will hold them."""
        if not 0 < permits <= self.burst:
            raise ValueError(f"permits must be in [1, burst={self.burst:g}], got {permits}")
        if self._last is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= permits - 1e-9:  # a caller that waited what it was told
            self._tokens -= permits
            return 0.0
        return (permits - self._tokens) / self.rate
