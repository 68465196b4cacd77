"""A Python stage over Arrow batches, named: what ``mapInArrow`` runs for a join or a map
(:class:`ArrowStage`), and two of them composed into one (:class:`Chain`).

Plain values, picklable: the workers import this module (a :class:`Chain` travels to them
by reference), so it imports nothing of pyspark at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

# What mapInArrow runs on each task's batches: ``partial(enrich_batches, plan)`` for a
# join (enrich.spark.join.join_batches), ``partial(map_batches, plan)`` for a map
# (enrich.spark.async_maps.map_batches), or a :class:`Chain` of them.
ArrowFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class ArrowStage:
    """One Python stage over Arrow batches, or several in a row composed into one.

    Attributes:
        input: the DataFrame the stage reads (the first one's, for a chain).
        function: what ``mapInArrow`` runs on each task's Arrow batches; picklable
            (Spark ships it to the workers, or the sink does: it holds the lookups).
        schema: the schema the function yields (the last stage's, for a chain).
        name: the join's or the map's name (``"a+b"`` for a chain, in order).
    """

    input: Any  # a pyspark DataFrame (typed Any: this module runs on workers too)
    function: ArrowFunction
    schema: StructType
    name: str

    def then(self, later: ArrowStage) -> ArrowStage:
        """This stage followed by ``later`` (which reads this one's output), as one."""
        return ArrowStage(
            input=self.input,
            function=Chain(self.function, later.function),
            schema=later.schema,
            name=f"{self.name}+{later.name}",
        )


@dataclass(frozen=True)
class Chain:
    """Two Arrow functions in a row: ``then(first(batches))``. Picklable."""

    first: ArrowFunction
    then: ArrowFunction

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return self.then(self.first(batches))
