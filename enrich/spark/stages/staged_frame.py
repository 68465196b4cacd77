"""The DataFrame ``lookup_join`` and ``async_map`` return: Spark's own, naming the stage
that made it.

The hand-over from a join (or a map) to a sink that may run it in its own write
(:func:`enrich.spark.low_latency`, :mod:`enrich.spark.sink.joined`) is this value:
:attr:`StagedFrame.arrow_stage`, given when the frame is made and never changed, read
back by :func:`~enrich.spark.stages.pipeline.stage_of`. Nothing is kept anywhere else
(no registry), and nothing is set on a DataFrame Spark made: a step derived from a
staged frame (``select``, ``filter``, any other) returns Spark's plain DataFrame, which
names no stage. A Spark Connect DataFrame is returned as it is, with no stage (the
low-latency profile refuses Spark Connect).

Driver side only: the workers never import this module.
"""

from __future__ import annotations

from typing import Any

from .arrow_stage import ArrowStage

try:
    from pyspark.sql.classic.dataframe import DataFrame as _Classic
except ImportError:  # pyspark 3.5: one DataFrame class, the classic one
    from pyspark.sql.dataframe import DataFrame as _Classic  # type: ignore[assignment]


class StagedFrame(_Classic):
    """A classic DataFrame made by one Python stage, which it names.

    Attributes:
        arrow_stage: the stage whose output this frame is (input, function, schema, name).
    """

    def __init__(self, frame: Any, arrow_stage: ArrowStage) -> None:
        super().__init__(frame._jdf, frame.sparkSession)
        self.arrow_stage = arrow_stage


def staged(frame: Any, stage: ArrowStage) -> Any:
    """``frame`` (a stage's output) as a :class:`StagedFrame` naming ``stage``; a Spark
    Connect frame as it is."""
    if type(frame) is not _Classic:
        return frame
    return StagedFrame(frame, stage)


def stage_named_by(frame: Any) -> ArrowStage | None:
    """The stage ``frame`` names, if it is a :class:`StagedFrame`."""
    return frame.arrow_stage if isinstance(frame, StagedFrame) else None
