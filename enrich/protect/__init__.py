"""The store's protections, shared by every connector (and by ``enrich.spark.async_map``):

* the job-wide rate limit: one budget of requests per second shared by every process
  of a job. ``JobRateLimit`` is the setting (``RedisLookup(job_rate_limit=...)``,
  ``HttpLookup(job_rate_limit=...)``); :mod:`.limiter` holds the mechanism and its
  guarantees, :mod:`.bucket` the local fallback bucket;
* the adaptive concurrency limit (``concurrency="auto"``): :mod:`.adaptive`, a
  synchronous state machine the connectors feed with their requests' latencies.
"""

from __future__ import annotations

from .job_rate import (
    JobRateLimit as JobRateLimit,
)

__all__ = ("JobRateLimit",)
