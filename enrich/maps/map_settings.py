"""The settings of an async map: one frozen object, validated once, passed whole.

``enrich.spark.async_map`` and ``enrich.spark.sql.register_async_udf`` keep their keyword
arguments and build a :class:`MapSettings` from them on the driver; the workers receive
it whole and never check it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.checks import check_choice, check_instance, check_int, check_non_negative, short
from ..engine.model import OutputMode
from ..engine.records.failure import ON_ERROR
from ..engine.records.record_schema import Schema, SchemaLike
from ..engine.retry import RetryStrategy
from ..engine.wait_settings import DEFAULT_TIMEOUT, WaitSettings, check_mode, check_seconds

if TYPE_CHECKING:
    from enrich.protect import JobRateLimit

# Calls in flight per task. A lookup join's capacity counts rows that share batched
# requests; here every row in flight is a call of its own, so the default is Flink's
# (``table.exec.async-lookup.buffer-capacity``), not the join's 131072.
DEFAULT_MAP_CAPACITY = 100
# A row waits at most this long for its batch to fill (``batch_size`` only).
DEFAULT_BATCH_WAIT = 0.01
CONCURRENCY_AUTO = "auto"


@dataclass(frozen=True, init=False)
class MapSettings:
    """How an async map runs.

    Attributes:
        returns: the fields the function adds (a :class:`~enrich.Schema`, from Spark DDL
            such as ``"score double, label string"``).
        mode: ORDERED keeps each partition's order; UNORDERED emits rows as their calls
            complete (a slow call holds only its own row).
        capacity: rows in flight per task at most (admitted and not yet handed back).
        timeout: seconds a row has from its first call to its final answer, retries
            included (None: no limit). Waiting for a ``job_rate_limit`` permit or a
            ``concurrency`` slot is not counted: it is back-pressure.
        retry: a :class:`~enrich.RetryStrategy`, or None.
        on_error: what a row whose call failed (or whose value does not fit ``returns``)
            becomes: "fail" (the task fails), "null" (null fields), "drop" (no row),
            "error_column" (null fields and the reason in ``error_column``).
        error_column: the reason's column (``on_error="error_column"``).
        batch_size: None: the function takes one row; N: it takes a list of up to N
            rows and returns one result per row, in order.
        batch_wait: seconds a row waits at most for its batch to fill.
        concurrency: calls in flight per process at most: None (``capacity`` per task
            bounds them), an int, or "auto" (an adaptive limit up to ``capacity``,
            following the service's latency).
        job_rate_limit: at most that many calls per second for the whole job (a
            :class:`enrich.protect.JobRateLimit` with its Redis), or None.

    Raises:
        ValueError: a setting is invalid; the message names it and its value.
        SchemaError: ``returns`` does not parse (the message names the field).
    """

    returns: Schema
    mode: OutputMode
    capacity: int
    timeout: float | None
    retry: RetryStrategy | None
    on_error: str
    error_column: str
    batch_size: int | None
    batch_wait: float
    concurrency: int | str | None
    job_rate_limit: JobRateLimit | None

    def __init__(
        self,
        *,
        returns: SchemaLike,
        mode: OutputMode | str = OutputMode.ORDERED,
        capacity: int = DEFAULT_MAP_CAPACITY,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryStrategy | None = None,
        on_error: str = "fail",
        error_column: str = "enrich_error",
        batch_size: int | None = None,
        batch_wait: float = DEFAULT_BATCH_WAIT,
        concurrency: int | str | None = None,
        job_rate_limit: JobRateLimit | None = None,
    ) -> None:
        checked = {
            "returns": _check_returns(returns),
            "mode": check_mode(mode),
            "capacity": check_int("capacity", capacity),
            "timeout": check_seconds("timeout", timeout),
            "retry": check_instance("retry", retry, RetryStrategy, "a RetryStrategy"),
            "on_error": check_choice("on_error", on_error, ON_ERROR),
            "error_column": _check_name("error_column", error_column),
            "batch_size": None if batch_size is None else check_int("batch_size", batch_size),
            "batch_wait": check_non_negative("batch_wait", batch_wait, "seconds"),
            "concurrency": _check_concurrency(concurrency),
            "job_rate_limit": _check_job_rate_limit(job_rate_limit),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def with_error(self) -> bool:
        """Whether the output carries the reason (``on_error="error_column"``)."""
        return self.on_error == "error_column"

    @property
    def is_gated(self) -> bool:
        """Whether calls pass a gate (a rate limit, a concurrency limit) to start."""
        return self.concurrency is not None or self.job_rate_limit is not None

    def operator(self) -> WaitSettings:
        """The operator's settings: rows are its records; a batch function's calls
        carry ``batch_size`` of them."""
        return WaitSettings(
            mode=self.mode,
            capacity=self.capacity,
            timeout=self.timeout,
            retry=self.retry,
            batch_size=self.batch_size or 1,
            batch_wait=self.batch_wait,
        )


def _check_returns(returns: Any) -> Schema:
    if returns is None or (isinstance(returns, str) and not returns.strip()):
        raise ValueError(
            "returns must name the fields the function adds, as Spark DDL "
            f"(e.g. 'score double, label string'), got {short(returns)}"
        )
    schema = Schema.of(returns)
    if not schema.names:
        raise ValueError(f"returns must have at least one field, got {short(returns)}")
    return schema


def _check_name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty str, got {short(value)}")
    return value


def _check_concurrency(value: Any) -> int | str | None:
    if value is None or value == CONCURRENCY_AUTO:
        return value  # type: ignore[no-any-return]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"concurrency must be None, an int >= 1 or 'auto', got {short(value)}")
    return value


def _check_job_rate_limit(value: Any) -> JobRateLimit | None:
    if value is None:
        return None
    from enrich.protect import JobRateLimit

    if not isinstance(value, JobRateLimit) or value.redis_url is None:
        raise ValueError(
            "job_rate_limit must be a JobRateLimit with the Redis of its shared bucket "
            "(JobRateLimit(rate=..., redis_url='redis://host:6379')) or None, got "
            f"{value.described() if isinstance(value, JobRateLimit) else short(value)}"
        )
    return value
