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

The object itself lives in the engine's floor
(:class:`enrich.engine.wait_settings.OperatorSettings`, no pyspark), where
``lookup_rows``, ``lookup_chunks`` and the jobs build it too; this module holds what
only the Spark faces add. The faces then build the engine's settings with it whole
(``JoinSettings(knobs=...)``, ``MapSettings(knobs=...)``), with what only a join
(key columns, ``how``, cache, ``max_batch``, ``prefix``) or a map (``returns``, batches)
has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ...engine.checks import short
from ...engine.model import OutputMode
from ...engine.records.failure import ON_ERROR
from ...engine.retry import RetryStrategy
from ...engine.wait_settings import (
    DEFAULT_ERROR_COLUMN as DEFAULT_ERROR_COLUMN,
    OperatorSettings as OperatorSettings,
)
from ...lookup.join_settings import DEFAULT_SPARK_CAPACITY
from ...maps.map_settings import DEFAULT_MAP_CAPACITY

if TYPE_CHECKING:
    from enrich.protect import JobRateLimit


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
        if "on_error" in knobs:
            self._check_on_error(knobs["on_error"])
        settings = OperatorSettings.built(given, knobs, capacity or self.capacity)
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
