"""The settings of a job-wide rate limit: one frozen, hashable record, validated once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..engine.checks import check_positive, short
from .masking import mask_url

# A process may hold this many seconds' worth of the job's rate granted and unspent:
# permits are fetched in batches so the hot path is not a round trip per request.
DEFAULT_BATCH_SECONDS = 0.01
# At most this many seconds' worth of the rate is granted at once after an idle spell.
DEFAULT_BURST_SECONDS = 0.1
# Without the limiter's Redis, each process keeps to the rate divided by this, unless
# ``fallback_rate`` says otherwise (see enrich.protect.limiter).
DEFAULT_FALLBACK_SHARES = 8
# Timeouts of the limiter's own Redis client: short, since a lookup waits on them.
DEFAULT_LIMITER_TIMEOUT = 0.25
KEY_PREFIX = "enrich:rate:"


@dataclass(frozen=True, kw_only=True)
class JobRateLimit:
    """At most ``rate`` requests (or keys) per second for the whole job, however many
    tasks, executors and processes share it.

    All processes draw permits from one bucket held in a Redis (a GCRA in one Lua
    script; see :mod:`enrich.protect.limiter` for the guarantees and what happens
    when that Redis is unreachable).

    Attributes:
        rate: permits per second for the whole job (> 0).
        redis_url: the Redis holding the bucket; None for a ``RedisLookup`` means the
            lookup's own (standalone) Redis. Its password never appears in a ``repr``.
        key: the bucket's Redis key; None derives one from the store, so every job and
            task limiting the same store with the same rate shares one budget. Give two
            jobs distinct keys to give them a budget each.
        fallback_rate: permits per second per process while the limiter's Redis cannot
            be reached; None means ``rate / 8``.
        burst_seconds: the most the bucket grants at once after an idle spell, in
            seconds of ``rate``.

    Raises:
        ValueError: a setting is invalid; the message names it and its value.
    """

    rate: float
    redis_url: str | None = field(default=None, repr=False)
    key: str | None = None
    fallback_rate: float | None = None
    burst_seconds: float = DEFAULT_BURST_SECONDS

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", check_positive("rate", self.rate))
        if self.redis_url is not None and (
            not isinstance(self.redis_url, str)
            or not self.redis_url.startswith(("redis://", "rediss://", "unix://"))
        ):
            raise ValueError(
                "redis_url must be a redis://, rediss:// or unix:// URL, got "
                + (mask_url(self.redis_url) if isinstance(self.redis_url, str) else "")
                + (short(self.redis_url) if not isinstance(self.redis_url, str) else "")
            )
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise ValueError(f"key must be a non-empty str or None, got {short(self.key)}")
        if self.fallback_rate is not None:
            object.__setattr__(
                self, "fallback_rate", check_positive("fallback_rate", self.fallback_rate)
            )
        object.__setattr__(
            self, "burst_seconds", check_positive("burst_seconds", self.burst_seconds)
        )

    @classmethod
    def of(cls, value: float | JobRateLimit | None, *, name: str) -> JobRateLimit | None:
        """A store's ``job_rate_limit=`` argument: a number (permits per second, the
        store's defaults for the rest), a ``JobRateLimit``, or None."""
        if value is None or isinstance(value, JobRateLimit):
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(
                f"{name} must be a number of permits per second, a JobRateLimit or None, "
                f"got {short(value)}"
            )
        return cls(rate=check_positive(name, value))

    def for_store(self, store: str, default_url: str | None) -> JobRateLimit:
        """These settings with the bucket's key and Redis filled in for ``store`` (a
        description of the store without secrets) and its default limiter Redis."""
        url = self.redis_url if self.redis_url is not None else default_url
        if url is None:
            raise ValueError(
                "job_rate_limit needs a Redis for its shared bucket: "
                "JobRateLimit(rate=..., redis_url='redis://host:6379')"
            )
        key = self.key
        if key is None:
            digest = hashlib.sha1(f"{store} {self.rate:g}".encode()).hexdigest()[:16]
            key = KEY_PREFIX + digest
        return JobRateLimit(
            rate=self.rate,
            redis_url=url,
            key=key,
            fallback_rate=self.fallback_rate,
            burst_seconds=self.burst_seconds,
        )

    @property
    def per_process_fallback(self) -> float:
        """Permits per second per process while the limiter's Redis is unreachable."""
        if self.fallback_rate is not None:
            return self.fallback_rate
        return self.rate / DEFAULT_FALLBACK_SHARES

    @property
    def batch(self) -> int:
        """Permits a process asks for at once (at least one)."""
        return max(1, int(self.rate * DEFAULT_BATCH_SECONDS))

    def described(self) -> str:
        """What a store's ``repr`` shows: no password."""
        parts = [f"rate={self.rate:g}"]
        if self.redis_url is not None:
            parts.append(f"redis_url={mask_url(self.redis_url, keep_user=True)!r}")
        if self.key is not None:
            parts.append(f"key={self.key!r}")
        if self.fallback_rate is not None:
            parts.append(f"fallback_rate={self.fallback_rate:g}")
        if self.burst_seconds != DEFAULT_BURST_SECONDS:
            parts.append(f"burst_seconds={self.burst_seconds:g}")
        return f"JobRateLimit({', '.join(parts)})"
