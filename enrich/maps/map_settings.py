"""The settings of an async map: one frozen object, validated once, passed whole.

``enrich.spark.async_map`` and ``enrich.spark.sql.register_async_udf`` keep their keyword
arguments and build a :class:`MapSettings` from them on the driver: the operator's knobs
as one :class:`~enrich.engine.wait_settings.OperatorSettings` (checked there, once), with
what only a map has (``returns``, batches); the workers receive it whole and never check
it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.checks import check_int, check_non_negative, short
from ..engine.records.record_schema import Schema, SchemaLike
from ..engine.wait_settings import (
    CONCURRENCY_AUTO as CONCURRENCY_AUTO,
    DEFAULT_BATCH_WAIT as DEFAULT_BATCH_WAIT,
    KnobsView,
    OperatorSettings,
    WaitSettings,
)

if TYPE_CHECKING:
    from enrich.protect import JobRateLimit

# Calls in flight per task. A lookup join's capacity counts rows that share batched
# requests; here every row in flight is a call of its own, so the default is Flink's
# (``table.exec.async-lookup.buffer-capacity``), not the join's 131072.
DEFAULT_MAP_CAPACITY = 100


@dataclass(frozen=True, init=False)
class MapSettings(KnobsView):
    """How an async map runs.

    Attributes:
        returns: the fields the function adds (a :class:`~enrich.Schema`, from Spark DDL
            such as ``"score double, label string"``).
        knobs: the operator's knobs (:class:`~enrich.engine.wait_settings.OperatorSettings`,
            its capacity set: rows in flight per task), read through the properties
            below. Its timeout does not count the wait for a ``job_rate_limit`` permit
            or a ``concurrency`` slot (back-pressure); ``concurrency`` None leaves
            ``capacity`` per task to bound the calls, "auto" is an adaptive limit up to
            ``capacity``, following the service's latency.
        batch_size: None: the function takes one row; N: it takes a list of up to N
            rows and returns one result per row, in order.
        batch_wait: seconds a row waits at most for its batch to fill.

    Args:
        knobs: the knobs taken whole (default: ``OperatorSettings()``); a knob given
            as a keyword argument (``mode``, ``capacity``, ``timeout``, ``retry``,
            ``on_error``, ``error_column``, ``concurrency``, ``job_rate_limit``) goes on
            top of it. Capacity defaults to 100 calls in flight.

    Raises:
        ValueError: a setting is invalid; the message names it and its value.
        SchemaError: ``returns`` does not parse (the message names the field).
        TypeError: a keyword argument that is neither a knob nor a map's setting.
    """

    returns: Schema
    knobs: OperatorSettings
    batch_size: int | None
    batch_wait: float

    def __init__(
        self,
        *,
        returns: SchemaLike,
        knobs: OperatorSettings | None = None,
        batch_size: int | None = None,
        batch_wait: float = DEFAULT_BATCH_WAIT,
        **given: Any,
    ) -> None:
        checked = {
            "returns": _check_returns(returns),
            "knobs": OperatorSettings.built(knobs, given, DEFAULT_MAP_CAPACITY),
            "batch_size": None if batch_size is None else check_int("batch_size", batch_size),
            "batch_wait": check_non_negative("batch_wait", batch_wait, "seconds"),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def concurrency(self) -> int | str | None:
        return self.knobs.concurrency

    @property
    def job_rate_limit(self) -> JobRateLimit | None:
        return self.knobs.job_rate_limit  # type: ignore[return-value]

    @property
    def is_gated(self) -> bool:
        """Whether calls pass a gate (a rate limit, a concurrency limit) to start."""
        return self.knobs.is_gated

    def operator(self) -> WaitSettings:
        """The operator's settings: rows are its records; a batch function's calls
        carry ``batch_size`` of them."""
        return WaitSettings.of(
            self.knobs,
            retry=self.knobs.retry,
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
