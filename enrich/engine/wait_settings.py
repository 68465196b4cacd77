"""The operator's settings: the knobs of every entry point in one object, and the run's.

:class:`OperatorSettings` holds the operator's knobs (rows in flight, time per row,
retries, order, what a failed row becomes, calls at once, a job-wide rate). Every entry
point builds it, from its keyword arguments or taken whole (``settings=`` in the Spark
faces): ``lookup_rows``, ``lookup_chunks``, ``LookupJoin``, ``enrich.spark.lookup_join``,
``async_map``, the SQL registrations, the jobs and ``enrich check``; the join's and the
map's settings (:class:`~enrich.lookup.join_settings.JoinSettings`,
:class:`~enrich.maps.map_settings.MapSettings`) and the lane hold it whole.
:class:`WaitSettings` is what one run of the operator uses (``ordered_wait`` and friends
build it from their keywords; a join or a map from its knobs, :meth:`WaitSettings.of`).

A knob is checked once, where its object is built; the error is a ``ValueError`` that
names it and shows the bad value (``"capacity must be an int >= 1, got 0"``). Downstream
code receives the object whole and never checks again. Imports no pyspark.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .checks import (
    check_choice as check_choice,
    check_instance as check_instance,
    check_int as check_int,
    check_non_negative as check_non_negative,
    check_seconds as check_seconds,
    short as short,
)
from .model import OutputMode
from .records.failure import ON_ERROR
from .retry import RetryStrategy

DEFAULT_TIMEOUT = 10.0
DEFAULT_CAPACITY = 100
# How long a record waits at most for its batch to fill (batched calls only): short
# beside a remote call, long beside the admission of a chunk of records.
DEFAULT_BATCH_WAIT = 0.01
DEFAULT_ERROR_COLUMN = "enrich_error"
CONCURRENCY_AUTO = "auto"


def check_mode(value: Any) -> OutputMode:
    """``value`` as an :class:`OutputMode` (an enum member, "ordered" or "unordered")."""
    if not isinstance(value, (OutputMode, str)):
        raise ValueError(f"mode must be 'ordered' or 'unordered', got {short(value)}")
    return OutputMode.of(value)


class SharedRateLimit(Protocol):
    """What ``job_rate_limit`` takes: an :class:`enrich.protect.JobRateLimit` (its
    shared bucket's Redis named)."""

    redis_url: str | None

    def described(self) -> str: ...


@dataclass(frozen=True, init=False)
class OperatorSettings:
    """How a join's or a map's operator runs (in each Spark task, or in a Python
    program). Frozen, keyword-only, checked on construction, picklable.

    Attributes:
        mode: ``OutputMode.ORDERED`` / "ordered" keeps the input's order; "unordered"
            emits rows as they complete. (SQL functions run ordered.)
        capacity: rows in flight at most (back-pressure beyond that); None: the entry
            point's default (for a Spark lookup join the source's own
            ``preferred_capacity`` when it has one, as a relational source does, else
            131072 rows, whose rows share batched requests; 100 for ``lookup_rows`` and
            an async map).
        timeout: seconds a row's lookup (or call) may spend at the store, retries'
            waits included; waits for capacity, a connection, a permit or a load never
            count (None: no limit).
        retry: a :class:`~enrich.RetryStrategy`, or None.
        on_error: what a failed row becomes: "fail" (the run fails), "null" (null
            fields), "drop" (no row; not in SQL), "error_column" (null fields and the
            reason in ``error_column``).
        error_column: the reason's column (``on_error="error_column"``).
        concurrency: calls in flight per worker process at most (async maps; a store
            sets its own): None, an int, or "auto" (an adaptive limit).
        job_rate_limit: at most that many calls per second for the whole job (async
            maps; a store sets its own): a :class:`enrich.protect.JobRateLimit` with
            its Redis, or None.

    Raises:
        ValueError: a knob is invalid; the message names it and its value.
    """

    mode: OutputMode
    capacity: int | None
    timeout: float | None
    retry: RetryStrategy | None
    on_error: str
    error_column: str
    concurrency: int | str | None
    job_rate_limit: SharedRateLimit | None = field(repr=False)

    def __init__(
        self,
        *,
        mode: OutputMode | str = OutputMode.ORDERED,
        capacity: int | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryStrategy | None = None,
        on_error: str = "fail",
        error_column: str = DEFAULT_ERROR_COLUMN,
        concurrency: int | str | None = None,
        job_rate_limit: SharedRateLimit | None = None,
    ) -> None:
        checked = {
            "mode": check_mode(mode),
            "capacity": None if capacity is None else check_int("capacity", capacity),
            "timeout": check_seconds("timeout", timeout),
            "retry": check_instance("retry", retry, RetryStrategy, "a RetryStrategy"),
            "on_error": check_choice("on_error", on_error, ON_ERROR),
            "error_column": _check_column(error_column),
            "concurrency": _check_concurrency(concurrency),
            "job_rate_limit": _check_job_rate_limit(job_rate_limit),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @classmethod
    def built(
        cls, settings: OperatorSettings | None, knobs: Mapping[str, Any], capacity: int
    ) -> OperatorSettings:
        """What an entry point runs with: ``settings`` (default: ``OperatorSettings()``)
        with the keyword arguments ``knobs`` on top (checked as a new object), and
        ``capacity`` (the entry point's default) where none is set.

        Raises:
            ValueError: ``settings`` is not an OperatorSettings, or a knob is invalid.
            TypeError: a keyword argument that is no knob.
        """
        if settings is not None and not isinstance(settings, OperatorSettings):
            raise ValueError(f"settings must be an OperatorSettings or None, got {short(settings)}")
        base = settings or OperatorSettings()
        return (replace(base, **knobs) if knobs else base).with_capacity(capacity)

    def with_capacity(self, default: int) -> OperatorSettings:
        """These knobs with ``default`` (an entry point's constant) as the capacity
        where none is set."""
        if self.capacity is not None:
            return self
        filled = copy.copy(self)
        object.__setattr__(filled, "capacity", default)
        return filled

    @property
    def rows_in_flight(self) -> int:
        """The capacity, once an entry point has set it (:meth:`with_capacity`)."""
        assert self.capacity is not None, "the entry point sets the capacity"
        return self.capacity

    @property
    def with_error(self) -> bool:
        """Whether the output carries the reason (``on_error="error_column"``)."""
        return self.on_error == "error_column"

    @property
    def is_gated(self) -> bool:
        """Whether calls pass a gate (a rate limit, a concurrency limit) to start."""
        return self.concurrency is not None or self.job_rate_limit is not None


class KnobsView:
    """The knobs of a join's or a map's settings, read through: the settings hold an
    :class:`OperatorSettings` whole as ``knobs`` (its capacity set) and answer for it."""

    knobs: OperatorSettings

    @property
    def mode(self) -> OutputMode:
        return self.knobs.mode

    @property
    def capacity(self) -> int:
        """Rows in flight at most (admitted and not yet handed back)."""
        return self.knobs.rows_in_flight

    @property
    def timeout(self) -> float | None:
        """Seconds a row's lookup may spend at the store: its calls and the waits
        between its retries, never its waits for capacity, a connection, a rate
        limit's permit or a cache's load (None: no limit)."""
        return self.knobs.timeout

    @property
    def retry(self) -> RetryStrategy | None:
        return self.knobs.retry

    @property
    def on_error(self) -> str:
        return self.knobs.on_error

    @property
    def error_column(self) -> str:
        return self.knobs.error_column

    @property
    def with_error(self) -> bool:
        """Whether the output carries the reason (``on_error="error_column"``)."""
        return self.knobs.with_error


def _check_column(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"error_column must be a non-empty str, got {short(value)}")
    return value


def _check_concurrency(value: Any) -> int | str | None:
    if value is None or value == CONCURRENCY_AUTO:
        return value  # type: ignore[no-any-return]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"concurrency must be None, an int >= 1 or 'auto', got {short(value)}")
    return value


def _check_job_rate_limit(value: Any) -> SharedRateLimit | None:
    if value is None:
        return None
    described = getattr(value, "described", None)
    if not isinstance(getattr(value, "redis_url", None), str) or not callable(described):
        shown = described() if callable(described) else short(value)
        raise ValueError(
            "job_rate_limit must be a JobRateLimit with the Redis of its shared bucket "
            f"(JobRateLimit(rate=..., redis_url='redis://host:6379')) or None, got {shown}"
        )
    return value  # type: ignore[no-any-return]


@dataclass(frozen=True, init=False)
class WaitSettings:
    """How one run of the operator goes: built (and validated) once by ``ordered_wait``
    and friends, or from knobs checked already (:meth:`of`).

    Attributes:
        mode: ORDERED or UNORDERED (a string is accepted and converted).
        capacity: records in flight at most (an int >= 1).
        timeout: seconds from a record's first call to its final completion, retries
            included; None for none.
        retry: a :class:`~enrich.RetryStrategy`, or None.
        batch_size: records per call of a batch function (``async_invoke_many``) at
            most; 1 starts each record's call as it is admitted.
        batch_wait: seconds a record waits at most for its batch to fill (``batch_size``
            > 1 only; none once the input has ended).

    Raises:
        ValueError: a setting is out of range; the message names it and its value.
    """

    mode: OutputMode
    capacity: int
    timeout: float | None
    retry: RetryStrategy | None
    batch_size: int
    batch_wait: float

    def __init__(
        self,
        *,
        mode: OutputMode | str = OutputMode.ORDERED,
        capacity: int = DEFAULT_CAPACITY,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryStrategy | None = None,
        batch_size: int = 1,
        batch_wait: float = DEFAULT_BATCH_WAIT,
    ) -> None:
        knobs = OperatorSettings(mode=mode, capacity=capacity, timeout=timeout, retry=retry)
        self._set(
            knobs.with_capacity(DEFAULT_CAPACITY),
            knobs.retry,
            check_int("batch_size", batch_size),
            check_non_negative("batch_wait", batch_wait, "seconds"),
        )

    @classmethod
    def of(
        cls,
        knobs: OperatorSettings,
        *,
        retry: RetryStrategy | None,
        batch_size: int = 1,
        batch_wait: float = DEFAULT_BATCH_WAIT,
    ) -> WaitSettings:
        """The run's settings from ``knobs`` with their capacity set, checked already
        (as are ``batch_size`` and ``batch_wait``, by the map's settings): not again."""
        settings = cls.__new__(cls)
        settings._set(knobs, retry, batch_size, batch_wait)
        return settings

    def _set(
        self, knobs: OperatorSettings, retry: RetryStrategy | None, batch_size: int, wait: float
    ) -> None:
        object.__setattr__(self, "mode", knobs.mode)
        object.__setattr__(self, "capacity", knobs.rows_in_flight)
        object.__setattr__(self, "timeout", knobs.timeout)
        object.__setattr__(self, "retry", retry)
        object.__setattr__(self, "batch_size", batch_size)
        object.__setattr__(self, "batch_wait", wait)
