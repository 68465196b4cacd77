"""Job-wide rate limits: one budget of requests per second shared by every process of a job.

``JobRateLimit`` is the setting (``RedisLookup(job_rate_limit=...)``,
``HttpLookup(job_rate_limit=...)``); :mod:`connectors.ratelimit.limiter` holds the
mechanism and its guarantees.
"""

from __future__ import annotations

from .settings import JobRateLimit

__all__ = ("JobRateLimit",)
