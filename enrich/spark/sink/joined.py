"""A query's Python stages (its lookup joins, its ``async_map`` calls) run inside a
sink's own write: one stage fewer, for any sink written on the SPI.

A query ``source -> lookup_join -> sink`` runs three Python stages in each task: the
source's read, the join's ``mapInArrow`` and the sink's write. Between two stages Spark
turns the Arrow batches Python yields into its own rows and back into Arrow for the next
worker (measured here: 20-70 ms a micro-batch between the join and the sink, and a third
Python process per task on two cores). A :class:`JoinableSink` runs the stage itself: it
receives the stage's input and applies the stage's function
(:class:`~enrich.spark.stages.pipeline.ArrowStage`) to each task's Arrow batches before
writing them, so the rows go from the source's worker to the sink's once.

A sink offers it by subclassing :class:`JoinableSink` instead of Spark's ``DataSource``,
and by writing what :meth:`JoinableSink.joined_schema` and
:meth:`JoinableSink.joined_function` say (the ``redis`` sink does; docs/writing-a-sink.md
shows a sink of one's own). :func:`register_joined` registers the sink with a stage.

How the stage travels: Spark builds a Python sink from its class and options alone, in
processes of its own, and an option would carry the lookups' secrets (a ``RedisLookup``
holds its URL) into the query's plan. So the stage travels with the sink's class: Spark
pickles a data source class when it is registered, with cloudpickle, which pickles a class
no module holds by value, class attributes and all, as it pickles a ``mapInArrow``
function. :func:`register_joined` makes that class in one step, its three attributes in
its body, under a format name of its own (Python's data source API takes a class, so a
class is what carries a query's stage); the sink's own class is pickled by reference.
"""

from __future__ import annotations

import json
import types
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from ..stages.arrow_stage import ArrowFunction, ArrowStage

FORMAT_INFIX = "-joined-"


class JoinableSink(DataSource):
    """A sink whose writers may run a query's Python stage on their input first.

    Its writers write what :meth:`joined_function` makes of each task's Arrow batches
    (:func:`run_stage`), of schema :meth:`joined_schema`; everything else (options,
    modes, exactly once) is the sink's own. On the sink's own class there is no stage:
    the class :func:`register_joined` makes holds one.
    """

    stage_function: ClassVar[ArrowFunction | None] = None
    stage_schema: ClassVar[str | None] = None  # the stage's output schema, as JSON

    def joined_schema(self, schema: StructType) -> StructType:
        """The schema of the rows written: the stage's output, or ``schema`` (the
        query's) without a stage."""
        if self.stage_schema is None:
            return schema
        return StructType.fromJson(json.loads(self.stage_schema))

    def joined_function(self) -> ArrowFunction | None:
        """The stage the writers run on their input first, or None."""
        # A staticmethod on the class (see register_joined): read unbound.
        return type(self).stage_function


def run_stage(stage: ArrowFunction | None, items: Iterator[Any]) -> Iterator[Any]:
    """A writer's input after the stage (as it is without one)."""
    return items if stage is None else stage(iter(items))


def register_joined(spark: Any, sink: type[JoinableSink], stage: ArrowStage) -> str:
    """Register ``sink`` running ``stage`` on its input in each task; returns the format
    name to write ``stage.input`` with (``<sink>-joined-<id>``, unique to this call)."""
    format_name = f"{sink.name()}{FORMAT_INFIX}{uuid.uuid4().hex[:12]}"
    body = {
        "__module__": __name__,
        "__doc__": f"{sink.__name__} running the stage {stage.name!r} (see {__name__}).",
        "name": classmethod(_format_name),
        "format_name": format_name,
        "stage_function": staticmethod(stage.function),
        "stage_schema": stage.schema.json(),
    }
    joined = types.new_class(
        f"{sink.__name__}[{stage.name}]", (sink,), {}, lambda ns: ns.update(body)
    )
    spark.dataSource.register(joined)
    return format_name


def _format_name(cls: Any) -> str:
    return str(cls.format_name)
