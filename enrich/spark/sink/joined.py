"""The lookup joins done inside the ``redis`` sink's write: one Python stage fewer.

A query ``redis-stream -> lookup_join -> redis`` runs three Python stages in each task:
the source's read, the join's ``mapInArrow`` and the sink's write. Between two stages
Spark turns the Arrow batches Python yields into its own rows and back into Arrow for
the next worker (measured here: 20-70 ms a micro-batch between the join and the sink,
and a third Python process per task on two cores). The sink can run the join itself:
it receives the join's input and applies the join's own function to each task's Arrow
batches before encoding them, so the rows go from the source's worker to the sink's
once.

Spark builds a Python sink from its options alone, in processes of its own, so the join
cannot travel as an option without its lookups' secrets (a ``RedisLookup`` holds its
URL): it travels as a class instead, :func:`~enrich.spark.sink.data_source.joined_format`
registers a subclass of the sink, under a name of its own, whose class body holds the
join. Spark pickles a class defined at run time by value, as it pickles a ``mapInArrow``
function.

``lookup_join`` and ``async_map`` mark the DataFrame they return with what the sink
needs (:func:`mark`); :func:`enrich.spark.low_latency` uses it when the DataFrame it is given
is such a join (or a chain of them) and falls back to the three stages otherwise (a
``select``, ``drop`` or any other step after the join returns a DataFrame without the
mark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.types import StructType

Transform = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
T = TypeVar("T")
MARK = "_enrich_sink_join"  # the attribute lookup_join sets on the DataFrame it returns


@dataclass(frozen=True)
class SinkJoin:
    """A join the sink can run: its input DataFrame, the function ``mapInArrow`` would
    run on each task's Arrow batches, and the schema it yields."""

    input: Any  # the join's input DataFrame
    transform: Transform
    schema: StructType


def mark(output: T, join: SinkJoin) -> T:
    """Mark ``output`` (the DataFrame a join returned) as ``join``; returns it."""
    setattr(output, MARK, join)
    return output


def of(df: Any) -> SinkJoin | None:
    """The joins ``df`` ends with, as one: its first input, the joins' functions applied
    in turn, the last one's schema. None when ``df`` is not a marked join."""
    join = getattr(df, MARK, None)
    if not isinstance(join, SinkJoin):
        return None
    inner = of(join.input)
    if inner is None:
        return join
    return SinkJoin(inner.input, _Chain(inner.transform, join.transform), join.schema)


@dataclass(frozen=True)
class _Chain:
    first: Transform
    then: Transform

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return self.then(self.first(batches))
