"""The stages lookup_join and async_map hand to a sink are named values: the DataFrame
they return names its stage (a StagedFrame, no registry), a chain composes into one stage,
and the sink that runs a stage is registered under a name of its own."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from enrich.spark import async_map, lookup_join
from enrich.spark.sink.joined import FORMAT_INFIX, register_joined
from enrich.spark.sink.redis.data_source import RedisSinkDataSource
from enrich.spark.stages import pipeline
from enrich.spark.stages.arrow_stage import ArrowStage, Chain
from enrich.spark.stages.pipeline import stage_of
from enrich.spark.stages.staged_frame import StagedFrame
from enrich.testing import FakeSource
from tests.spark.functions import Double

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]


def test_the_join_and_the_map_return_a_frame_naming_their_stage_and_keep_nothing_else(
    spark: SparkSession,
) -> None:
    orders = spark.range(4).withColumnRenamed("id", "order_id")
    plain = orders.mapInArrow(lambda batches: batches, orders.schema)
    source = FakeSource({1: ("one",)}, schema="name string")
    mapped = async_map(orders, Double(), "doubled long", name="doubling")
    joined = lookup_join(mapped, source, on="order_id", name="users")
    own = set(vars(plain)) | {"schema"}  # pyspark caches the schema once read
    for df in (mapped, joined):
        assert isinstance(df, StagedFrame)  # the hand-over: a value of its own class
        assert set(vars(df)) - own == {"arrow_stage"}  # its one field, nothing else
    assert not hasattr(pipeline, "STAGES")  # no registry
    stage = stage_of(joined)
    assert isinstance(stage, ArrowStage)
    assert stage.input is orders and stage.name == "doubling+users"
    assert isinstance(stage.function, Chain)
    assert stage.schema == joined.schema
    assert stage_of(mapped) == ArrowStage(
        input=orders, function=stage.function.first, schema=mapped.schema, name="doubling"
    )
    assert stage_of(joined.select("*")) is None and stage_of(orders) is None


def test_a_chain_runs_its_stages_in_turn_and_pickles() -> None:
    def add(column: str):  # type: ignore[no-untyped-def]
        def run(batches):  # type: ignore[no-untyped-def]
            for batch in batches:
                yield batch.append_column(column, pa.array([1] * batch.num_rows))

        return run

    chain = Chain(add("a"), add("b"))
    [out] = list(chain(iter([pa.RecordBatch.from_pydict({"k": [1, 2]})])))
    assert out.schema.names == ["k", "a", "b"]
    assert isinstance(pickle.loads(pickle.dumps(Chain(len, len))), Chain)


def test_the_sink_that_runs_a_stage_is_registered_under_a_name_of_its_own(
    spark: SparkSession,
) -> None:
    orders = spark.range(3).withColumnRenamed("id", "order_id")
    source = FakeSource({}, schema="name string")
    stage = stage_of(lookup_join(orders, source, on="order_id", name="named"))
    assert stage is not None
    first = register_joined(spark, RedisSinkDataSource, stage)
    second = register_joined(spark, RedisSinkDataSource, stage)
    assert first.startswith(f"redis{FORMAT_INFIX}") and second != first
    sink = RedisSinkDataSource({"url": "redis://127.0.0.1:1", "stream": "out"})
    assert sink.joined_function() is None  # the sink's own class runs no stage
