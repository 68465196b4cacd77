"""The settings every relational lookup shares: its pool, time limits, batch size, limits.

One frozen, hashable record per source: equal records share a process's pool (it is the
key of the connector's per-loop registry), so it holds the URL (its ``repr`` shows no
password) and nothing live. Each value is checked on construction, the message naming
the setting and the bad value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from enrich.spi import JobRateLimit, check_choice, check_int, check_positive

from .target import Target
from .url import DatabaseUrl

__all__ = (
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_LIFETIME",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_TIMEOUT",
    "CONCURRENCY",
    "STATEMENTS_PER_CONNECTION",
    "SqlSettings",
)

# Connections per process: statements in flight. Four keep a 2-core machine's server
# busy without making its statements wait on each other (eight shared the same CPU and
# only lengthened each statement: benchmarks/results/postgres.md).
DEFAULT_POOL_SIZE = 4
DEFAULT_MAX_BATCH = 1000  # keys per statement (a connector may set its own)
# Statements a Spark join queues per pool connection on its defaults: the rows it admits
# per task (``SqlLookup.preferred_capacity``) are this many batches per connection, so
# the queue drains in a few statements' time, far within the timeout even on a busy
# machine (a 5,000-key statement took at most a few hundred ms at load 10 here).
STATEMENTS_PER_CONNECTION = 4
DEFAULT_TIMEOUT = 10.0  # seconds: connecting, and each statement (the server cancels it)
DEFAULT_MAX_LIFETIME = 1800.0  # seconds a connection serves before it is replaced
CONCURRENCY = ("fixed", "auto")


@dataclass(frozen=True, kw_only=True)
class SqlSettings:
    """A relational lookup's settings (besides its schema).

    Attributes:
        url: the database, parsed (password kept out of ``repr``).
        target: the table and key column(s), or the user's query.
        pool_size: connections per process (statements in flight, under ``"fixed"``).
        max_lifetime: seconds a connection is used before it is closed and replaced.
        timeout: seconds to connect, and each statement's limit (``statement_timeout``:
            the server stops a statement that runs longer).
        max_batch: most keys per statement.
        concurrency: ``"fixed"`` or ``"auto"`` (an adaptive limit up to ``pool_size``).
        job_rate_limit: the job-wide budget in keys per second (a
            :class:`~enrich.spi.JobRateLimit` naming its Redis), or None.
    """

    url: DatabaseUrl
    target: Target
    pool_size: int = DEFAULT_POOL_SIZE
    max_lifetime: float = DEFAULT_MAX_LIFETIME
    timeout: float = DEFAULT_TIMEOUT
    max_batch: int = DEFAULT_MAX_BATCH
    concurrency: str = "fixed"
    job_rate_limit: JobRateLimit | None = None

    def __post_init__(self) -> None:
        check_int("pool_size", self.pool_size)
        check_positive("max_lifetime", self.max_lifetime, "a number of seconds")
        check_positive("timeout", self.timeout, "a number of seconds")
        check_int("max_batch", self.max_batch)
        check_choice("concurrency", self.concurrency, CONCURRENCY)

    @classmethod
    def of(
        cls,
        kind: str,
        url: str,
        *,
        schemes: tuple[str, ...],
        default_port: int,
        password: str | None,
        table: str | None,
        key: str | Sequence[str],
        query: str | None,
        full_query: str | None,
        job_rate_limit: Any,
        **settings: Any,
    ) -> SqlSettings:
        """A connector's keyword arguments, parsed and checked: the URL (``password``
        wins over the URL's), the target, and ``job_rate_limit`` named after the store
        (``kind``, the masked URL and the table); ``settings`` are the other fields."""
        parsed = DatabaseUrl.parse(
            url, schemes=schemes, default_port=default_port, password=password
        )
        target = Target.of(table=table, key=key, query=query, full_query=full_query)
        store = f"{kind} {parsed.masked()} {target.table_name}"
        return cls(
            url=parsed,
            target=target,
            job_rate_limit=cls.job_limit(job_rate_limit, store),
            **settings,
        )

    @staticmethod
    def job_limit(value: Any, store: str) -> JobRateLimit | None:
        """``job_rate_limit=``: a :class:`JobRateLimit` (its ``redis_url`` holds the shared
        bucket; a database has no bucket of its own) or None, named after ``store``."""
        limit = JobRateLimit.of(value, name="job_rate_limit")
        if limit is None:
            return None
        if limit.redis_url is None:
            raise ValueError(
                "job_rate_limit on a database needs the Redis of its shared bucket: "
                "JobRateLimit(rate=..., redis_url='redis://host:6379')"
            )
        return limit.for_store(store, default_url=None)

    @property
    def preferred_capacity(self) -> int:
        """Rows in flight per task a Spark join admits on its defaults:
        ``STATEMENTS_PER_CONNECTION`` full statements (``max_batch`` keys) per pool
        connection (``pool_size``), so that no row waits behind more than a few
        statements of its own process."""
        return STATEMENTS_PER_CONNECTION * self.pool_size * self.max_batch

    def described(self, defaults: SqlSettings | None = None) -> str:
        """The settings as a ``repr`` shows them (the URL masked), defaults left out."""
        parts = [repr(self.url.masked()), self.target.described()]
        base = defaults or SqlSettings(url=self.url, target=self.target)
        for name in ("pool_size", "max_batch", "concurrency"):
            if getattr(self, name) != getattr(base, name):
                parts.append(f"{name}={getattr(self, name)!r}")
        for name in ("timeout", "max_lifetime"):
            if getattr(self, name) != getattr(base, name):
                parts.append(f"{name}={getattr(self, name):g}")
        if self.job_rate_limit is not None:
            parts.append(f"job_rate_limit={self.job_rate_limit.described()}")
        return ", ".join(parts)
