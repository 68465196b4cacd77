"""The operator's knobs, in one object: rows in flight, time per row, retries, order,
calls at once, a job-wide rate, and what a failed row becomes.

``lookup_join``, ``async_map``, the SQL registrations (``register_lookup``,
``register_lookup_join``, ``register_async_udf``) and the jobs take the same knobs. They
are declared here once, as :class:`OperatorSettings` (frozen, keyword-only, checked on
construction with the bad value in the message). Every face takes it whole
(``settings=OperatorSettings(capacity=256, timeout=2.0)``) and the knobs as keyword
arguments too, as before (``lookup_join(df, users, on="id", capacity=256)``); keyword
arguments go on top of ``settings``. Which knobs a face takes, and its defaults, is its
:class:`Face`; the keyword lists the faces declare to type checkers are the
``TypedDict`` s below (``**knobs: Unpack[JoinKnobs]``).

The faces then build the engine's settings from it (:meth:`OperatorSettings.for_join`,
:meth:`OperatorSettings.for_map`): :class:`~enrich.lookup.join_settings.JoinSettings` and
:class:`~enrich.maps.map_settings.MapSettings`, with what only a join (key columns,
``how``, cache, ``max_batch``, ``prefix``) or a map (``returns``, batches) has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict

from ...engine.checks import check_choice, check_instance, check_int, check_seconds, short
from ...engine.model import OutputMode
from ...engine.records.failure import ON_ERROR
from ...engine.retry import RetryStrategy
from ...engine.wait_settings import DEFAULT_TIMEOUT, check_mode
from ...lookup.join_settings import DEFAULT_SPARK_CAPACITY
from ...maps.map_settings import CONCURRENCY_AUTO, DEFAULT_MAP_CAPACITY

if TYPE_CHECKING:
    from enrich.lookup.join_settings import JoinSettings
    from enrich.maps.map_settings import MapSettings
    from enrich.protect import JobRateLimit

DEFAULT_ERROR_COLUMN = "enrich_error"


@dataclass(frozen=True, kw_only=True)
class OperatorSettings:
    """How a join's or a map's operator runs in each task. Frozen, keyword-only,
    checked on construction, picklable.

    Attributes:
        mode: ``OutputMode.ORDERED`` / "ordered" keeps each partition's order;
            "unordered" emits rows as they complete. (SQL functions run ordered.)
        capacity: rows in flight per task at most (back-pressure beyond that); None:
            the face's default: for a lookup join the source's own
            ``preferred_capacity`` when it has one (a relational source: what its pool
            answers in time), else 131072 rows (rows share batched requests); 100 for
            an async map, one call per row.
        timeout: seconds a row's lookup may spend at the store, retries' waits included;
            waits for capacity, a connection, a permit or a load never count (None: no
            limit).
        retry: a :class:`~enrich.RetryStrategy`, or None.
        on_error: what a failed row becomes: "fail" (the task fails), "null" (null
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

    mode: OutputMode = OutputMode.ORDERED
    capacity: int | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    retry: RetryStrategy | None = None
    on_error: str = "fail"
    error_column: str = DEFAULT_ERROR_COLUMN
    concurrency: int | str | None = None
    job_rate_limit: JobRateLimit | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", check_mode(self.mode))
        if self.capacity is not None:
            check_int("capacity", self.capacity)
        check_seconds("timeout", self.timeout)
        check_instance("retry", self.retry, RetryStrategy, "a RetryStrategy")
        check_choice("on_error", self.on_error, ON_ERROR)
        if not isinstance(self.error_column, str) or not self.error_column:
            raise ValueError(
                f"error_column must be a non-empty str, got {short(self.error_column)}"
            )
        limit = self.concurrency
        if not (limit is None or limit == CONCURRENCY_AUTO) and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(f"concurrency must be None, an int >= 1 or 'auto', got {short(limit)}")
        if self.job_rate_limit is not None:
            _check_job_rate_limit(self.job_rate_limit)

    def for_join(self, **join: Any) -> JoinSettings:
        """The join's settings: these knobs with the join's own (``on``, ``how``,
        ``cache``, ``max_batch``, ``prefix``); ``capacity`` must be set."""
        from ...lookup.join_settings import JoinSettings

        return JoinSettings(**self._shared(), **join)

    def for_map(self, **map_: Any) -> MapSettings:
        """The map's settings: these knobs with the map's own (``returns``,
        ``batch_size``, ``batch_wait``); ``capacity`` must be set."""
        from ...maps.map_settings import MapSettings

        limits: dict[str, Any] = {
            "concurrency": self.concurrency,
            "job_rate_limit": self.job_rate_limit,
        }
        return MapSettings(**self._shared(), **limits, **map_)

    def _shared(self) -> dict[str, Any]:
        """The knobs a join's and a map's settings both hold."""
        return {
            "mode": self.mode,
            "capacity": self.capacity,
            "timeout": self.timeout,
            "retry": self.retry,
            "on_error": self.on_error,
            "error_column": self.error_column,
        }


def _check_job_rate_limit(value: Any) -> None:
    from enrich.protect import JobRateLimit

    shared = isinstance(value, JobRateLimit) and value.redis_url is not None
    if not shared:
        shown = value.described() if isinstance(value, JobRateLimit) else short(value)
        raise ValueError(
            "job_rate_limit must be a JobRateLimit with the Redis of its shared bucket "
            f"(JobRateLimit(rate=..., redis_url='redis://host:6379')) or None, got {shown}"
        )


class CallKnobs(TypedDict, total=False):
    """The knobs every face takes as keyword arguments."""

    capacity: int
    timeout: float | None
    retry: RetryStrategy | None
    on_error: str
    error_column: str


class JoinKnobs(CallKnobs, total=False):
    """``lookup_join``'s knobs."""

    mode: OutputMode | str


class MapCallKnobs(CallKnobs, total=False):
    """``register_async_udf``'s knobs (SQL runs ordered)."""

    concurrency: int | str | None
    job_rate_limit: JobRateLimit | None


class MapKnobs(MapCallKnobs, total=False):
    """``async_map``'s knobs."""

    mode: OutputMode | str


SQL_ON_ERROR = ("fail", "null", "error_column")  # a SQL function cannot drop a row


@dataclass(frozen=True)
class Face:
    """One entry point's view of the knobs: which it takes, and its defaults.

    Attributes:
        name: the entry point (named in errors).
        knobs: the keyword arguments it takes (a ``TypedDict`` above).
        capacity: its default capacity.
        on_error: the error policies it offers (SQL cannot drop a row).
    """

    name: str
    knobs: frozenset[str]
    capacity: int
    on_error: tuple[str, ...] = ON_ERROR

    def settings(
        self,
        given: OperatorSettings | None,
        knobs: Mapping[str, Any],
        *,
        capacity: int | None = None,
    ) -> OperatorSettings:
        """``given`` (default: ``OperatorSettings()``) with the keyword arguments
        ``knobs`` on top, ``capacity`` (default: the face's) where none is set, checked
        for this face.

        Raises:
            TypeError: a keyword argument the face does not take (as Python would).
            ValueError: a knob is invalid, or set (on ``given``) where the face does
                not take it; named with its value.
        """
        unknown = sorted(set(knobs) - self.knobs)
        if unknown:
            raise TypeError(f"{self.name}() got an unexpected keyword argument {unknown[0]!r}")
        if given is not None and not isinstance(given, OperatorSettings):
            raise ValueError(f"settings must be an OperatorSettings or None, got {short(given)}")
        if "capacity" in knobs:  # None stands for the default on the object only
            check_int("capacity", knobs["capacity"])
        if "on_error" in knobs:
            self._check_on_error(knobs["on_error"])
        settings = replace(given or OperatorSettings(), **knobs)
        if settings.capacity is None:
            settings = replace(settings, capacity=capacity or self.capacity)
        self._check_on_error(settings.on_error)
        if "mode" not in self.knobs and settings.mode is not OutputMode.ORDERED:
            raise ValueError(
                f"{self.name} runs ordered (a batch's results line up with its rows); "
                f"mode must be 'ordered', got {settings.mode.value!r}"
            )
        for knob in ("concurrency", "job_rate_limit"):
            if knob not in self.knobs and getattr(settings, knob) is not None:
                raise ValueError(
                    f"{self.name} takes no {knob}: a lookup's store sets its own "
                    f"(RedisLookup(..., {knob}=...), HttpLookup(..., {knob}=...))"
                )
        return settings

    def _check_on_error(self, value: Any) -> None:
        if self.on_error != ON_ERROR and (not isinstance(value, str) or value not in self.on_error):
            raise ValueError(f"on_error must be one of {self.on_error} for SQL, got {short(value)}")


def _knobs(kind: type) -> frozenset[str]:
    return frozenset(kind.__optional_keys__)  # type: ignore[attr-defined]


LOOKUP_JOIN = Face("lookup_join", _knobs(JoinKnobs), DEFAULT_SPARK_CAPACITY)
ASYNC_MAP = Face("async_map", _knobs(MapKnobs), DEFAULT_MAP_CAPACITY)
SQL_LOOKUP = Face("register_lookup", _knobs(CallKnobs), DEFAULT_SPARK_CAPACITY, SQL_ON_ERROR)
SQL_LOOKUP_JOIN = Face("register_lookup_join", _knobs(CallKnobs), DEFAULT_SPARK_CAPACITY)
SQL_ASYNC_UDF = Face("register_async_udf", _knobs(MapCallKnobs), DEFAULT_MAP_CAPACITY, SQL_ON_ERROR)
