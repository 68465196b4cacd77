"""The ``redis`` sink running a query's Python stage in its own write: one stage fewer.

A query ``redis-stream -> lookup_join -> redis`` runs three Python stages in each task:
the source's read, the join's ``mapInArrow`` and the sink's write. Between two stages
Spark turns the Arrow batches Python yields into its own rows and back into Arrow for
the next worker (measured here: 20-70 ms a micro-batch between the join and the sink,
and a third Python process per task on two cores). :class:`StageRedisSink` runs the
stage itself: it receives the stage's input and applies the stage's function
(:class:`~enrich.spark.stages.pipeline.ArrowStage`) to each task's Arrow batches before
encoding them, so the rows go from the source's worker to the sink's once.

How the stage travels: Spark builds a Python sink from its options alone, in processes
of its own, and an option would carry the lookups' secrets (a ``RedisLookup`` holds its
URL) into the query's plan. So the stage travels with the sink's class:
:func:`register_stage_sink` registers, under a format name of its own
(``redis-joined-<id>``), a subclass of :class:`StageRedisSink` whose two class
attributes hold the stage's function and schema. Spark pickles a data source class with
cloudpickle, which pickles a class defined inside a function (no module holds it) by
value, attributes and all, as it pickles a ``mapInArrow`` function; the module-level
class above it is pickled by reference.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, ClassVar

from pyspark.sql.types import StructType

from ...stages.pipeline import ArrowFunction, ArrowStage
from .data_source import RedisSinkDataSource

FORMAT_PREFIX = "redis-joined-"


class StageRedisSink(RedisSinkDataSource):
    """The ``redis`` sink, writing what a Python stage makes of its input.

    The writers receive the stage's input and run :attr:`stage_function` on each
    task's Arrow batches; what they encode and write is its output, of schema
    :attr:`stage_schema`. Everything else (options, modes, exactly once) is the
    ``redis`` sink's. Used through :func:`register_stage_sink`, which sets the three
    class attributes on a subclass of its own per query.
    """

    format_name: ClassVar[str] = "redis-joined"
    stage_function: ClassVar[ArrowFunction | None] = None
    stage_schema: ClassVar[str | None] = None  # the stage's output schema, as JSON

    @classmethod
    def name(cls) -> str:
        return cls.format_name

    def _written(self, schema: StructType) -> StructType:
        if self.stage_schema is None:
            return schema
        return StructType.fromJson(json.loads(self.stage_schema))

    def _stage(self) -> ArrowFunction | None:
        # A staticmethod on the class (see register_stage_sink): read unbound.
        return type(self).stage_function


def register_stage_sink(spark: Any, stage: ArrowStage) -> str:
    """Register a ``redis`` sink that runs ``stage`` on its input in each task; returns
    the format name to write ``stage.input`` with (unique to this call)."""
    format_name = f"{FORMAT_PREFIX}{uuid.uuid4().hex[:12]}"

    class QuerySink(StageRedisSink):
        """One query's StageRedisSink: pickled by value with its stage (see the module)."""

    QuerySink.format_name = format_name
    QuerySink.stage_function = staticmethod(stage.function)
    QuerySink.stage_schema = stage.schema.json()
    QuerySink.__qualname__ = QuerySink.__name__ = f"StageRedisSink[{stage.name}]"
    spark.dataSource.register(QuerySink)
    return format_name
