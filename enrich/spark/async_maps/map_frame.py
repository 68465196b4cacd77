"""``async_map``: Flink's async I/O (``AsyncDataStream.orderedWait/unorderedWait``) for
any async function, on a DataFrame; checked on the driver, run by ``mapInArrow`` on the
workers (:mod:`.map_batches`)."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from ...engine.function import AsyncFunction, invoke_style
from ...engine.records.record_schema import SchemaLike
from ...maps.map_settings import DEFAULT_BATCH_WAIT, MapSettings
from ..join.join_frame import check_collisions
from ..spark_types import spark_type
from ..stages.operator_settings import ASYNC_MAP, Face, OperatorSettings

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..stages.arrow_stage import ArrowFunction
    from ..stages.operator_settings import MapKnobs
    from .map_batches import MapPlan


def async_map(
    df: DataFrame,
    fn: Any,
    returns: SchemaLike,
    *,
    name: str | None = None,
    batch_size: int | None = None,
    batch_wait: float = DEFAULT_BATCH_WAIT,
    observe: bool | None = None,
    settings: OperatorSettings | None = None,
    **knobs: Unpack[MapKnobs],
) -> DataFrame:
    """Call ``fn`` for every row of ``df``, asynchronously, and add the fields it returns.

    Works on batch and streaming DataFrames alike. Each Python worker runs its task's
    rows through the engine (Flink's ``AsyncWaitOperator``): at most ``capacity`` calls
    in flight per task, a timeout per row, retries, an error policy per row, metrics.

    Args:
        df: the input; every column is kept.
        fn: ``async def fn(row: dict) -> dict | list[dict] | None`` (the row's columns
            by name); or an :class:`~enrich.AsyncFunction` (``open()`` / ``close()``
            once per Python worker process on the worker's loop, where a session or a
            client is kept; ``invoke(row)`` returning a list of dicts, or callback-style
            ``async_invoke(row, result)``; ``timeout(row, result)`` for a fallback); or,
            with ``batch_size``, ``async def fn(rows: list[dict]) -> list`` returning
            one result per row, in order. It is pickled to the executors.
        returns: the fields ``fn`` adds, as Spark DDL (``"score double, label string"``),
            a mapping or a :class:`~enrich.Schema`.
        settings: the operator's knobs in one object
            (:class:`~enrich.spark.OperatorSettings`: mode, capacity, timeout, retry,
            on_error, error_column, concurrency, job_rate_limit); each knob is also a
            keyword argument, which goes on top of ``settings``:
        mode: "ordered" keeps each partition's order; "unordered" emits rows as their
            calls complete (a slow call then holds only its own row, where under
            "ordered" it holds every row behind it, up to ``capacity``).
        capacity: rows in flight per task at most (calls under way, or done and waiting
            for their turn under "ordered"); a full task waits (back-pressure).
        timeout: seconds per row from its first call to its final answer, retries
            included (None: none). Waiting for a ``job_rate_limit`` permit or a
            ``concurrency`` slot does not count.
        retry: a retry strategy (``FixedDelayRetry``, ``ExponentialBackoffRetry``,
            with ``retry_on_exception`` / ``retry_on_result`` predicates), or None.
        on_error: what a row whose call failed (after retries) or whose result does not
            fit ``returns`` becomes: "fail" (the task fails), "null" (null fields),
            "drop" (no row), "error_column" (null fields, the reason in
            ``error_column``).
        error_column: the reason column's name (``on_error="error_column"``), last.
        name: the map's name for metrics (default ``"map_<n>"``).
        batch_size: call ``fn`` with lists of up to this many rows.
        batch_wait: seconds a row waits at most for its batch to fill.
        job_rate_limit: at most that many calls per second for the whole job (a
            :class:`enrich.protect.JobRateLimit` with its Redis).
        concurrency: calls in flight per worker process at most: an int, "auto" (an
            adaptive limit up to ``capacity`` that follows the service's latency), or
            None (``capacity`` alone bounds them).
        observe: carry the map's metrics through ``DataFrame.observe`` (as
            :func:`~enrich.spark.lookup_join` does; None: on for a streaming ``df``
            under Spark Connect).

    Returns:
        ``df``'s columns followed by ``returns``' fields (a dict is one row; a list one
        row per dict, none for an empty list; None keeps the row with null fields),
        then ``error_column`` under "error_column".

    Raises:
        ValueError: a setting is invalid, ``fn`` is not an async function, or a field
            of ``returns`` (or the error column) is already a column of ``df``.
        SchemaError: ``returns`` does not parse (the message names the field).
    """
    from ..join.join_frame import join_name
    from ..metrics.stage_labels import describe
    from ..stages.pipeline import add_operator_stage
    from .map_batches import map_batches

    mapping = map_settings(ASYNC_MAP, fn, returns, settings, knobs, batch_size, batch_wait)
    fields = added_fields(df.schema, mapping)
    name = join_name(name, prefix="map")
    describe(name, store="function", capacity=mapping.capacity)

    def function(accumulator: Any, observed: bool) -> ArrowFunction:
        return partial(map_batches, map_plan(name, fn, mapping, accumulator, observed=observed))

    return add_operator_stage(df, fields, name=name, observe=observe, function=function)


def map_settings(
    face: Face,
    fn: Any,
    returns: SchemaLike,
    settings: OperatorSettings | None,
    knobs: Mapping[str, Any],
    batch_size: int | None,
    batch_wait: float,
) -> MapSettings:
    """What every map face checks first: the map's settings (``face``'s knobs from
    ``settings`` and ``knobs``, with ``returns`` and the batches), then ``fn``.

    Raises:
        ValueError: a setting is invalid (named with its value), or ``fn`` is not an
            async function.
        TypeError: a keyword argument the face does not take.
        SchemaError: ``returns`` does not parse.
    """
    mapping = MapSettings(
        returns=returns,
        knobs=face.settings(settings, knobs),
        batch_size=batch_size,
        batch_wait=batch_wait,
    )
    check_function(fn, batched=batch_size is not None)
    return mapping


def map_plan(
    name: str, fn: Any, settings: MapSettings, accumulator: Any, *, observed: bool = False
) -> MapPlan:
    """The plan a map's workers run: ``fn`` under ``settings``, its metrics under
    ``name`` (a fresh key: each registration's process-wide state is its own)."""
    from .map_batches import MapPlan

    return MapPlan(
        name=name,
        key=uuid.uuid4().hex,
        fn=fn,
        columns=tuple(settings.returns.names),
        settings=settings,
        accumulator=accumulator,
        observed=observed,
    )


def added_fields(schema: StructType, settings: MapSettings) -> list[StructField]:
    """The fields a map adds to ``schema``: ``returns``' fields, then the reason.

    Raises:
        ValueError: one of them is already a column (named in the message).
    """
    added = list(settings.returns.names)
    if settings.with_error:
        added.append(settings.error_column)
    check_collisions(schema.names, added, what="async_map", fix="rename the fields of returns")
    fields = [
        StructField(f.name, spark_type(f.type), nullable=True) for f in settings.returns.fields
    ]
    if settings.with_error:
        fields.append(StructField(settings.error_column, StringType(), nullable=True))
    return fields


def check_function(fn: Any, *, batched: bool) -> None:
    """``fn`` is an async function (or async callable) or an AsyncFunction with a call
    the map can make.

    Raises:
        ValueError: it is neither, naming what it is and what is expected.
    """
    if isinstance(fn, AsyncFunction):
        try:
            style = invoke_style(fn)
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        if style == "many":
            raise ValueError(
                f"{type(fn).__name__} implements async_invoke_many(); async_map calls "
                "invoke() or async_invoke() (give batch_size= for calls of several rows)"
            )
        return
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    ):
        return
    shape = "async def fn(rows: list[dict]) -> list" if batched else "async def fn(row: dict)"
    raise ValueError(
        f"fn must be an async function ({shape}) or an enrich.AsyncFunction, got "
        f"{fn!r}{' (a plain function: make it async def)' if callable(fn) else ''}"
    )
