"""The stages lookup_join and async_map hand to the redis sink are named values in
enrich.spark.stages.pipeline: nothing is set on the DataFrames they return, a chain composes
into one stage, and the sink that runs a stage is a class found by its name."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from enrich.spark import async_map, lookup_join
from enrich.spark.sink.redis.stage_sink import FORMAT_PREFIX, StageRedisSink, register_stage_sink
from enrich.spark.stages.pipeline import ArrowStage, Chain, stage_of
from enrich.testing import FakeSource
from tests.spark.functions import Double

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]


def test_the_join_and_the_map_name_their_stage_and_set_nothing_on_the_dataframe(
    spark: SparkSession,
) -> None:
    orders = spark.range(4).withColumnRenamed("id", "order_id")
    plain = orders.mapInArrow(lambda batches: batches, orders.schema)
    source = FakeSource({1: ("one",)}, schema="name string")
    mapped = async_map(orders, Double(), "doubled long", name="doubling")
    joined = lookup_join(mapped, source, on="order_id", name="users")
    own = set(vars(plain)) | {"schema"}  # pyspark caches the schema once read
    for df in (mapped, joined):
        assert set(vars(df)) <= own, set(vars(df)) - own  # no attribute of ours on it
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
    first, second = register_stage_sink(spark, stage), register_stage_sink(spark, stage)
    assert first.startswith(FORMAT_PREFIX) and second != first
    sink = StageRedisSink({"url": "redis://127.0.0.1:1", "stream": "out"})
    assert sink._stage() is None  # the class itself runs no stage: its subclasses do
