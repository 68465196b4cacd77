"""Async functions as Spark SQL functions: ``register_async_udf(spark, "score", fn, ...)``.

``SELECT id, score(struct(*)) AS s FROM orders`` calls ``fn`` for every row, with the
semantics of :func:`enrich.spark.async_map` (at most ``capacity`` calls in flight per
task, a timeout per row with its retries, an error policy per row, metrics) and returns
a struct of ``returns``' fields per row, in the rows' order. What ``fn`` receives:

* one struct argument: its fields by name, so ``score(struct(*))`` passes the row's
  columns and ``score(struct(user_id, amount))`` those two;
* plain arguments (``score(user_id, amount)``): Spark hands a Python function its
  arguments' values but not their names, so they are named by ``arguments=`` given at
  registration (``arguments=("user_id", "amount")``), else ``col1``, ``col2``, ... (as
  Spark names an unnamed struct field).

A row's struct is NULL when ``fn`` returned None or an empty list (a list gives its first
dict), when its struct argument is NULL (no call is made), and for a failed row under
``on_error="null"``; under ``"error_column"`` a failed row has NULL fields and the reason.
Works on pyspark 3.5 and 4.0 (an iterator pandas UDF passing the same Arrow arrays,
:mod:`.pandas_udf`) and on 4.1+ (an Arrow UDF).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

try:
    from pyspark.sql.pandas.functions import arrow_udf
except ImportError:  # pyspark < 4.1 (3.5, 4.0): a pandas UDF on the same arrays
    arrow_udf = None  # type: ignore[assignment]

from ...engine.records.record_schema import SchemaLike
from ...maps.map_settings import DEFAULT_BATCH_WAIT, MapSettings
from ..async_maps.map_frame import map_plan, map_settings
from ..async_maps.structs import map_structs
from ..metrics.accumulator import register
from ..metrics.stage_labels import describe
from ..spark_types import spark_type
from ..stages.operator_settings import SQL_ASYNC_UDF, OperatorSettings

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..stages.operator_settings import MapCallKnobs

__all__ = ("register_async_udf",)


def register_async_udf(
    spark: SparkSession,
    name: str,
    fn: Any,
    returns: SchemaLike,
    *,
    batch_size: int | None = None,
    batch_wait: float = DEFAULT_BATCH_WAIT,
    arguments: Sequence[str] | None = None,
    settings: OperatorSettings | None = None,
    **knobs: Unpack[MapCallKnobs],
) -> Any:
    """Register ``name(...)`` as a Spark SQL function calling ``fn`` for each row.

    Args:
        spark: the session to register the function in.
        name: the SQL function's name (also its metrics' name, see
            :func:`enrich.spark.statistics`).
        fn: as for :func:`enrich.spark.async_map`: ``async def fn(row: dict)``, an
            :class:`~enrich.AsyncFunction`, or with ``batch_size`` ``async def
            fn(rows: list[dict]) -> list``.
        returns: the struct's fields, as Spark DDL (``"score double, label string"``).
        batch_size: with ``batch_wait``, ``settings`` and the knobs ``capacity``,
            ``timeout``, ``retry``, ``job_rate_limit``, ``concurrency``: as for
            :func:`enrich.spark.async_map` (rows keep their order: no mode).
        on_error: "fail", "null" or "error_column" (a SQL function cannot drop a row).
        error_column: the struct field holding the reason under "error_column".
        arguments: the names of the function's arguments, in order, when it is called
            with plain (not struct) arguments.

    Returns:
        The UDF (callable on DataFrame columns too).

    Raises:
        ValueError: a setting is invalid, ``fn`` is not an async function, or the
            error column is also a field of ``returns``.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an SQL identifier, got {name!r}")
    names = _check_arguments(arguments)
    mapping = map_settings(SQL_ASYNC_UDF, fn, returns, settings, knobs, batch_size, batch_wait)
    describe(name, store="function", capacity=mapping.capacity)
    plan = map_plan(name, fn, mapping, register(spark, name))
    function = partial(map_structs, plan, names)
    return_type = async_struct_type(mapping)
    if arrow_udf is None:
        from .pandas_udf import pandas_struct_udf

        return spark.udf.register(name, pandas_struct_udf(function, return_type))

    def structs(inputs: Iterator[Any]) -> Iterator[pa.Array]:
        return function(inputs)

    # Spark picks the UDF's kind from the type hints: an iterator of argument arrays (a
    # tuple of them for several arguments) to an iterator of struct arrays.
    structs.__annotations__ = {
        "inputs": Iterator[tuple[pa.Array, ...]],
        "return": Iterator[pa.Array],
    }
    # pyspark's stubs type only the functionType= form, which warns at run time.
    return spark.udf.register(name, cast(Any, arrow_udf)(structs, return_type))


def async_struct_type(settings: MapSettings) -> StructType:
    """The struct an async SQL function returns: ``returns``' fields, then the reason."""
    fields = [
        StructField(f.name, spark_type(f.type), nullable=True) for f in settings.returns.fields
    ]
    if settings.with_error:
        if settings.error_column in settings.returns.names:
            raise ValueError(
                f"error_column {settings.error_column!r} is also a field of returns; "
                "choose another error_column"
            )
        fields.append(StructField(settings.error_column, StringType(), nullable=True))
    return StructType(fields)


def _check_arguments(arguments: Any) -> tuple[str, ...] | None:
    if arguments is None:
        return None
    names = (arguments,) if isinstance(arguments, str) else arguments
    if (
        not isinstance(names, (list, tuple))
        or not names
        or not all(isinstance(n, str) and n for n in names)
        or len(set(names)) != len(names)
    ):
        raise ValueError(
            f"arguments must be the distinct names of the function's arguments, got {arguments!r}"
        )
    return tuple(names)
