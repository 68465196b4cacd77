"""A lookup join SQL reads as a join: ``SELECT * FROM users_join(TABLE(orders))``.

``register_lookup_join(spark, "users_join", users, input=orders_schema, on="user_id")``
registers a table function whose rows are every input column followed by the
dimension's columns: a left or inner join, a key with several rows (1:N) giving several
rows, the same error policy and error column as :func:`enrich.spark.lookup_join`::

    SELECT * FROM users_join(TABLE(orders))
    SELECT o.order_id, o.name FROM users_join(TABLE(SELECT * FROM orders WHERE amount > 0)) o
    -- key affinity in SQL: all rows of a key go to one task
    SELECT * FROM users_join(TABLE(orders) PARTITION BY user_id)

It is an Arrow-native Python UDTF (``pyspark.sql.functions.arrow_udtf``, Spark 4.1+):
Spark hands it the input as Arrow record batches, and it runs them through the same
columnar lane as ``lookup_join`` (keys probed and asked a batch's distinct keys at a
time, joined by ``take``), with the requests of the next batches in flight while one is
assembled. Why not the other forms, measured or tried on pyspark 4.3:

* ``LATERAL dim(o.user_id)``: Spark refuses Arrow UDTFs on the right of a lateral join
  (``LATERAL_JOIN_WITH_ARROW_UDTF_UNSUPPORTED``), and a row UDTF is called once per
  input row: no batching, so no bulk lookups;
* a UDTF with ``analyze`` (an output schema derived from the input table's) must be a
  row UDTF too (SPARK-53286): hence the input's columns are given at registration
  (``input=``: a DataFrame, a view's name or a schema), and a table with other columns
  is refused with a message naming them.

Under ``PARTITION BY``, Spark gives each key group its own UDTF instance, so batches of
different groups do not overlap their requests: use it for affinity when groups are
large. Rows keep the input's order within each partition (ordered mode).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

try:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.functions import arrow_udtf
    from pyspark.sql.types import StructType
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "enrich.spark.sql.join_table needs pyspark >= 4.1 (Arrow UDTFs) and pyarrow"
    ) from exc

from ...lookup.cache.full import FullCache
from ...lookup.cache.lookup_cache import LookupCache
from ...lookup.contract.lookup_source import LookupSource
from ...lookup.join_settings import DEFAULT_MAX_BATCH
from ..join.join_frame import join_shape
from ..join.lane_push import LanePush
from ..metrics.accumulator import register
from ..metrics.stage_labels import describe, store_of
from ..stages.operator_settings import SQL_LOOKUP_JOIN, OperatorSettings

if TYPE_CHECKING:
    from pyspark.sql.udtf import UserDefinedTableFunction
    from typing_extensions import Unpack

    from ..stages.operator_settings import CallKnobs

__all__ = ("register_lookup_join",)


def register_lookup_join(
    spark: SparkSession,
    name: str,
    source: LookupSource,
    *,
    input: DataFrame | StructType | str,
    on: str | Sequence[str],
    how: str = "left",
    cache: LookupCache | FullCache | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    prefix: str = "",
    settings: OperatorSettings | None = None,
    **knobs: Unpack[CallKnobs],
) -> Any:
    """Register ``name(TABLE(...))``: the input's rows joined with ``source`` (see the module).

    Args:
        spark: the session to register the table function in.
        name: the SQL name (also the metrics' name, see :func:`enrich.spark.statistics`).
        source: the dimension store; pickled to the executors.
        input: the columns of the tables it will be given: a DataFrame, the name of a
            table or view, or a schema. ``TABLE(...)`` arguments must have exactly these
            columns (names and order).
        on: with ``how``, ``cache``, ``max_batch``, ``prefix``, ``settings`` and the
            knobs ``capacity``, ``timeout``, ``retry``, ``on_error``, ``error_column``:
            as for :func:`enrich.spark.lookup_join` (rows keep their order: no mode).

    Returns:
        The registered table function (callable on a DataFrame's ``asTable()`` too).

    Raises:
        ValueError: a key column is missing or of a type no key may have, output names
            collide, or a setting is invalid (each named).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an SQL identifier, got {name!r}")
    own = {"on": on, "how": how, "cache": cache, "max_batch": max_batch, "prefix": prefix}
    schema = _input_schema(spark, input)
    shape = join_shape(SQL_LOOKUP_JOIN, schema, source, settings, knobs, **own)
    describe(name, store=store_of(source), capacity=shape.settings.capacity)
    plan = shape.plan(name, register(spark, name))
    output = StructType([*schema.fields, *shape.fields])
    expected = list(schema.names)

    class LookupJoinTable:
        """One instance per task (or per ``PARTITION BY`` group)."""

        def __init__(self) -> None:
            self.push: LanePush | None = None

        def eval(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
            if batch.schema.names != expected:
                raise ValueError(
                    f"{name}: the table has columns {batch.schema.names}, but {name} was "
                    f"registered for {expected}; register it again with input= that table"
                )
            if self.push is None:
                self.push = LanePush(plan, batch)
            yield from self.push.push(batch)

        def terminate(self) -> Iterator[pa.RecordBatch]:
            if self.push is not None:
                yield from self.push.drain()

        def cleanup(self) -> None:
            if self.push is not None:
                self.push.close()

    LookupJoinTable.__name__ = LookupJoinTable.__qualname__ = f"lookup_join_{name}"
    table_function = cast(
        "UserDefinedTableFunction", arrow_udtf(LookupJoinTable, returnType=output)
    )
    return spark.udtf.register(name, table_function)


def _input_schema(spark: SparkSession, input: Any) -> StructType:
    if isinstance(input, DataFrame):
        return input.schema
    if isinstance(input, StructType):
        return input
    if isinstance(input, str):
        return spark.table(input).schema
    raise ValueError(f"input must be a DataFrame, a table name or a StructType, got {input!r}")
