"""Lookup-join metrics: counters plus a mergeable latency histogram.

Everything here is plain data that pickles and adds up, so executors' numbers can be
summed on the driver.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, fields

# Log-scale latency buckets: bucket i holds latencies up to 10us * 1.1**i (~0.3% of
# relative error is not needed; 10% is plenty for p50/p99 of network calls).
_BASE = 1e-5
_GROWTH = 1.1
_LOG_GROWTH = math.log(_GROWTH)


def _bucket(seconds: float) -> int:
    if seconds <= _BASE:
        return 0
    return math.ceil(math.log(seconds / _BASE) / _LOG_GROWTH)


def bucket_bound(bucket: int) -> float:
    """The upper bound (seconds, inclusive) of log-scale bucket ``bucket``."""
    return _BASE * _GROWTH**bucket


def bucket_at_most(seconds: float) -> int:
    """The highest bucket whose upper bound is ``seconds`` or less (0 below the first)."""
    bucket = _bucket(seconds)
    return bucket if bucket_bound(bucket) <= seconds or bucket == 0 else bucket - 1


class LatencyHistogram:
    """Counts of request latencies in log-scale buckets; quantiles within ~10%.

    ``seconds`` is the sum of the latencies recorded: with the bucket counts, what a
    Prometheus histogram exposes (``_bucket``, ``_sum``, ``_count``) for any bucket
    bounds chosen among :func:`bucket_bound`'s, exactly.
    """

    __slots__ = ("counts", "seconds", "total")

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.total = 0
        self.seconds = 0.0

    def record(self, seconds: float) -> None:
        self.counts[_bucket(seconds)] += 1
        self.total += 1
        self.seconds += seconds

    def merge(self, other: LatencyHistogram) -> None:
        self.counts.update(other.counts)
        self.total += other.total
        self.seconds += other.seconds

    def cumulative(self, bucket: int) -> int:
        """Latencies recorded at or below :func:`bucket_bound` ``(bucket)``."""
        return sum(n for b, n in self.counts.items() if b <= bucket)

    def quantile(self, q: float) -> float | None:
        """The upper bound of the bucket holding quantile ``q`` (seconds), or None."""
        if not self.total:
            return None
        rank = q * self.total
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return bucket_bound(bucket)
        return bucket_bound(max(self.counts))  # pragma: no cover - rounding guard

    def __getstate__(self) -> tuple[dict[int, int], int, float]:
        return dict(self.counts), self.total, self.seconds

    def __setstate__(self, state: tuple[dict[int, int], int, float]) -> None:
        self.counts = Counter(state[0])
        self.total = state[1]
        self.seconds = state[2]


@dataclass
class JoinMetrics:
    """What one lookup join did (per process, or summed over executors).

    Attributes:
        rows_in: records that entered the join.
        rows_out: rows it emitted (1:N rows counted one by one).
        requests: ``lookup_many`` calls made.
        keys_requested: keys sent in those calls.
        coalesced: records that shared their key's lookup with another record (the same
            key in the same chunk, or a key already pending or in flight).
        cache_hits / cache_misses: keys answered / not answered by the cache (each
            distinct key of a chunk is looked up in the cache once).
        misses: records whose key was not found.
        null_keys: records whose key was null (they join nothing and ask nothing).
        timeouts: records that ran out of time.
        retries: keys asked again after an error or a miss.
        errors: records that ended in an error, by kind ("timeout", "status:503", ...).
        latency: request latencies.
        concurrency_limit: with a store's ``concurrency="auto"``, its requests allowed in
            flight per process (merged: the highest of the processes); 0 without.
        target_latency: the latency that limit aims at, seconds (merged: the highest).
        throttled: requests the store throttled (429, 503, timeouts) as the adaptive
            limit counted them.
        peak_in_flight: the most records in flight at once (an async map's rows; merged:
            the highest of the tasks); 0 where not measured.
        rate_limit_waits / rate_limit_wait_seconds: calls that waited for a job rate
            limit's permits (``job_rate_limit``), and the seconds they waited.
    """

    rows_in: int = 0
    rows_out: int = 0
    requests: int = 0
    keys_requested: int = 0
    coalesced: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    misses: int = 0
    null_keys: int = 0
    timeouts: int = 0
    retries: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    concurrency_limit: int = 0
    target_latency: float | None = None
    throttled: int = 0
    peak_in_flight: int = 0
    rate_limit_waits: int = 0
    rate_limit_wait_seconds: float = 0.0

    @property
    def keys_per_request(self) -> float:
        return self.keys_requested / self.requests if self.requests else 0.0

    @property
    def cache_hit_ratio(self) -> float:
        total = self.cache_hits + self.cache_misses
        return self.cache_hits / total if total else 0.0

    @property
    def latency_p50(self) -> float | None:
        return self.latency.quantile(0.5)

    @property
    def latency_p99(self) -> float | None:
        return self.latency.quantile(0.99)

    def merge(self, other: JoinMetrics) -> None:
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.update(other.errors)
        self.latency.merge(other.latency)
        self.concurrency_limit = max(self.concurrency_limit, other.concurrency_limit)
        self.peak_in_flight = max(self.peak_in_flight, other.peak_in_flight)
        self.rate_limit_wait_seconds += other.rate_limit_wait_seconds
        if other.target_latency is not None:
            self.target_latency = max(self.target_latency or 0.0, other.target_latency)

    def summary(self) -> str:
        """One readable line, for logs."""
        p50, p99 = self.latency_p50, self.latency_p99
        lat = f"p50 {p50 * 1e3:.1f}ms p99 {p99 * 1e3:.1f}ms" if p50 and p99 else "no requests"
        errors = ", ".join(f"{k}={v}" for k, v in sorted(self.errors.items())) or "none"
        return (
            f"rows {self.rows_in}->{self.rows_out}, {self.requests} "
            f"request{'' if self.requests == 1 else 's'} "
            f"({self.keys_per_request:.1f} keys each), coalesced {self.coalesced}, "
            f"cache hit ratio {self.cache_hit_ratio:.2f}, misses {self.misses}, "
            f"null keys {self.null_keys}, "
            f"latency {lat}, timeouts {self.timeouts}, retries {self.retries}, errors {errors}"
            + (f", peak in flight {self.peak_in_flight}" if self.peak_in_flight else "")
            + self._concurrency_summary()
        )

    def _concurrency_summary(self) -> str:
        if not self.concurrency_limit:
            return ""
        target = self.target_latency
        aim = f", target {target * 1e3:.1f}ms" if target is not None else ""
        return f", concurrency limit {self.concurrency_limit}{aim}, throttled {self.throttled}"


_COUNTERS = tuple(
    f.name
    for f in fields(JoinMetrics)
    # levels, not counts: merged by their highest value
    if f.type in ("int", int) and f.name not in ("concurrency_limit", "peak_in_flight")
)


def record_concurrency(metrics: JoinMetrics, source: object) -> None:
    """Copy ``source``'s adaptive concurrency limit, if it has one (an
    ``adaptive_limit()`` answering a :class:`enrich.protect.adaptive.AdaptiveLimit`
    or None), into ``metrics``: the limit and target latency now, and the throttled
    requests not yet reported by any join; and its waits for a job rate limit's
    permits (``rate_limit_waits()``) not yet reported by any join."""
    waits = getattr(source, "rate_limit_waits", None)
    if waits is not None:
        count, seconds = waits()
        metrics.rate_limit_waits += count
        metrics.rate_limit_wait_seconds += seconds
    ask = getattr(source, "adaptive_limit", None)
    limit = ask() if ask is not None else None
    if limit is None:
        return
    stats = limit.statistics()
    metrics.concurrency_limit = stats.limit
    metrics.target_latency = stats.target_latency
    metrics.throttled += limit.take_throttled()
