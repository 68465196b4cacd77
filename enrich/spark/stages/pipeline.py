"""The Python stages of a query, named: what ``lookup_join`` and ``async_map`` add, and
what a sink may run in its own write.

``lookup_join`` and ``async_map`` each add one Python stage to a query: ``mapInArrow``
running a function over each task's Arrow batches. An :class:`ArrowStage` names such a
stage: its input DataFrame, the function, the schema it yields and the join's (or the
map's) name. Both add their stage through :func:`add_operator_stage` (their metrics'
accumulator, or observed metrics), which calls :func:`add_arrow_stage`: ``mapInArrow``,
and the DataFrame it returns a :class:`~enrich.spark.stages.staged_frame.StagedFrame`
naming its stage. :func:`stage_of` reads it back, the stages a DataFrame ends with
composed into one (a chain of joins and maps runs as one function).

The hand-over is that returned value, nothing else: no registry, nothing set on a
DataFrame Spark made, and a DataFrame derived from a stage's output (``select``,
``drop``, any step) is Spark's own, with no stage.

Its reader is :func:`enrich.spark.low_latency`: given a stage's output, it writes the
stage's input to a sink that runs the stage's function in each task before writing the
rows (:mod:`enrich.spark.sink.joined`), so the rows go from the source's worker to the
sink's once (one Python stage fewer; docs/latency.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .arrow_stage import ArrowFunction, ArrowStage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructField, StructType


def add_arrow_stage(
    df: DataFrame, function: ArrowFunction, schema: StructType, *, name: str
) -> DataFrame:
    """``df.mapInArrow(function, schema)``, returned as a
    :class:`~enrich.spark.stages.staged_frame.StagedFrame` naming its stage ``name`` (a
    sink may run it instead: :func:`enrich.spark.low_latency`)."""
    from .staged_frame import staged

    stage = ArrowStage(input=df, function=function, schema=schema, name=name)
    return staged(df.mapInArrow(function, schema), stage)  # type: ignore[no-any-return]


def add_operator_stage(
    df: DataFrame,
    fields: Sequence[StructField],
    *,
    name: str,
    observe: bool | None,
    function: Callable[[Any, bool], ArrowFunction],
) -> DataFrame:
    """The stage a join or a map adds to ``df``: its output is ``df``'s columns, then
    ``fields``; its metrics go to an accumulator registered under ``name``.

    ``function(accumulator, observed)`` makes the stage's Arrow function. Observed
    metrics (``observe``; None: on for a streaming ``df`` where no accumulator carries
    them, i.e. under Spark Connect) ride on the stage's rows through
    ``DataFrame.observe`` (:mod:`enrich.spark.metrics.observed`): such a stage is not
    named, since its rows must pass through Spark's ``observe``. Any other is returned
    naming its stage (:func:`add_arrow_stage`), which a sink may run.
    """
    from pyspark.sql.types import StructType

    from ..metrics.accumulator import register
    from ..metrics.observed import metrics_field, observed

    accumulator = register(df.sparkSession, name)
    # Observed metrics cost throughput (docs/spark-versions.md): on by default only where
    # nothing else carries the metrics, a streaming stage under Spark Connect.
    observing = bool(observe) if observe is not None else df.isStreaming and accumulator is None
    run = function(accumulator, observing)
    if not observing:
        return add_arrow_stage(df, run, StructType([*df.schema.fields, *fields]), name=name)
    schema = StructType([*df.schema.fields, *fields, metrics_field()])
    return observed(df.mapInArrow(run, schema), name)


def stage_of(df: Any) -> ArrowStage | None:
    """The stages ``df`` ends with, as one: its first input, their functions applied in
    turn, the last one's schema. None when ``df`` is not a stage's output."""
    from .staged_frame import stage_named_by

    stage = stage_named_by(df)
    if stage is None:
        return None
    earlier = stage_of(stage.input)
    return stage if earlier is None else earlier.then(stage)
