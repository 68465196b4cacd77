"""Lookups as Spark SQL functions: ``register_lookup(spark, "dim_user", users)``.

The function takes the key (or the parts of a composite key) and returns a struct of the
dimension fields, NULL when the key finds nothing. It is a vectorized Arrow UDF (on
pyspark 3.5 and 4.0, which have none, a pandas UDF passing the same Arrow arrays through:
:mod:`enrich.spark.sql.pandas_udf`) running on the same engine as
:func:`enrich.spark.lookup_join` (batched, coalesced lookups, the per-process cache and
pools, at most ``capacity`` rows in flight per task), and works in batch and streaming
queries alike.

SQL patterns::

    -- left join: select the struct (or its fields through a subquery alias)
    SELECT o.*, u.name, u.tier
    FROM (SELECT *, dim_user(user_id) AS u FROM orders) o

    -- inner join: keep the rows whose key was found
    SELECT o.*, u.name FROM (SELECT *, dim_user(user_id) AS u FROM orders) o
    WHERE u IS NOT NULL

    -- several lookups in one query: side by side, or one fed by another's field
    SELECT x.order_id, x.u.name, x.s.city, dim_country(x.u.country).label AS country
    FROM (SELECT *, dim_user(user_id) AS u, dim_shop(shop_id) AS s FROM orders) x

    -- composite keys: one argument per part
    SELECT *, dim_order(region, order_no) AS d FROM events

What does not work in Spark SQL: ``dim_user(user_id).*`` does not parse; alias the
struct in a subquery and select ``u.name, u.tier`` (or ``u.*``) from it, as above. A single
field straight off the call (``dim_user(user_id).name``) does work, but writing it for
several fields may call the lookup once per field: alias the struct once instead.

Semantics: one struct per input row. A key with several rows (1:N) gives its first
row; use :func:`enrich.spark.lookup_join` to get every row. ``on_error="null"`` turns a
failed lookup into NULL; "error_column" adds a string field (``error_column``) to the
struct, non-NULL with the reason when the lookup failed; "fail" (the default) fails the
task. Rows keep their order (the UDF is always ORDERED).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

try:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StringType, StructField, StructType
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "enrich.spark.sql needs pyspark, pyarrow and pandas<3: pip install 'spark-enrich[spark]'"
    ) from exc

try:
    from pyspark.sql.pandas.functions import arrow_udf
except ImportError:  # pyspark < 4.1 (3.5, 4.0): a pandas UDF on the same lane, see sql_pandas
    arrow_udf = None  # type: ignore[assignment]

from ...lookup.cache.lookup_cache import LookupCache
from ...lookup.contract.lookup_source import LookupSource
from ...lookup.join_settings import DEFAULT_MAX_BATCH
from ..join.join_batches import JoinPlan, lookup_structs_for
from ..join.join_frame import join_settings
from ..join.key_columns import checked_key_arrays
from ..metrics.accumulator import register
from ..metrics.stage_labels import describe, store_of
from ..spark_types import spark_type
from ..stages.operator_settings import SQL_LOOKUP, OperatorSettings

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..stages.operator_settings import CallKnobs

__all__ = ("register_lookup", "lookup_struct_type")


def lookup_struct_type(
    source: LookupSource, *, on_error: str = "fail", error_column: str = "enrich_error"
) -> StructType:
    """The struct type a lookup function returns for ``source``."""
    fields = [StructField(f.name, spark_type(f.type), nullable=True) for f in source.schema.fields]
    if on_error == "error_column":
        if error_column in source.schema.names:
            raise ValueError(
                f"error_column {error_column!r} is also a field of the source's schema; "
                f"choose another error_column"
            )
        fields.append(StructField(error_column, StringType(), nullable=True))
    return StructType(fields)


def register_lookup(
    spark: SparkSession,
    name: str,
    source: LookupSource,
    *,
    cache: LookupCache | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    settings: OperatorSettings | None = None,
    **knobs: Unpack[CallKnobs],
) -> Any:
    """Register ``name(key, ...)`` as a Spark SQL function looking keys up in ``source``.

    Args:
        spark: the session to register the function in.
        name: the SQL function's name (also the metrics' name, see
            :func:`enrich.spark.statistics`).
        source: the dimension store; pickled to the executors, with its limits: a
            store's ``job_rate_limit=`` (requests or keys per second for the whole job,
            shared by every task) and ``concurrency="auto"`` apply to the function's
            lookups as to a ``lookup_join``'s (a job config sets them on the store).
        cache / max_batch / settings, and the knobs capacity / timeout / retry: as for
            :func:`enrich.spark.lookup_join` (rows keep their order: no mode).
        on_error: "fail", "null" or "error_column" (see the module docstring).
        error_column: the struct field holding the reason under "error_column".

    Returns:
        The UDF, callable on DataFrame columns too: ``df.select(dim_user("user_id"))``.
        Called with several columns, they form a composite (tuple) key; a NULL part
        finds nothing.

    Raises:
        ValueError: a setting is invalid (the message names it and its value).

    An argument is a string, an integral type (tinyint to bigint) or binary, as for
    :func:`enrich.spark.lookup_join`. Spark gives a Python function no say when a query
    is analysed, so an argument of another type (double, boolean, timestamp, ...) fails
    the query on the function's first batch, before any lookup, with an error naming the
    argument, its type and the cast that fixes it.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an SQL identifier, got {name!r}")
    join = join_settings(SQL_LOOKUP, source, settings, knobs, cache=cache, max_batch=max_batch)
    return_type = lookup_struct_type(source, on_error=join.on_error, error_column=join.error_column)
    describe(name, store=store_of(source), capacity=join.capacity)
    plan = JoinPlan(
        name=name,
        source=source,
        on=(),
        columns=source.schema.names,
        settings=join,
        accumulator=register(spark, name),
    )

    structs = lookup_structs_for(plan)

    def function(inputs: Iterator[Any]) -> Iterator[pa.Array]:
        return structs(checked_key_arrays(name, inputs))

    if arrow_udf is None:
        from .pandas_udf import pandas_lookup_udf

        return spark.udf.register(name, pandas_lookup_udf(plan, return_type))

    # Spark picks the UDF's kind from the type hints: an iterator of key arrays (a
    # tuple of them for several arguments) to an iterator of struct arrays.
    function.__annotations__ = {
        "inputs": Iterator[tuple[pa.Array, ...]],
        "return": Iterator[pa.Array],
    }
    # pyspark's stubs type only the functionType= form, which warns at run time.
    udf = cast(Any, arrow_udf)(function, return_type)
    return spark.udf.register(name, udf)
