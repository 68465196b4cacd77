"""The operator's knobs are one object, OperatorSettings, that every Spark entry point
takes whole or builds from its keyword arguments (which keep working, on top of it)."""

from __future__ import annotations

import inspect
from dataclasses import fields
from typing import Any

import pytest
from pyspark.sql import SparkSession

from enrich import FixedDelayRetry, OutputMode
from enrich.spark import OperatorSettings, async_map, lookup_join
from enrich.spark.sql import register_async_udf, register_lookup, register_lookup_join
from enrich.spark.stages.operator_settings import (
    ASYNC_MAP,
    LOOKUP_JOIN,
    SQL_ASYNC_UDF,
    SQL_LOOKUP,
    SQL_LOOKUP_JOIN,
)
from enrich.spark.stages.pipeline import stage_of
from enrich.testing import FakeSource
from tests.spark.functions import Double

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]

FACES = {
    lookup_join: LOOKUP_JOIN,
    async_map: ASYNC_MAP,
    register_lookup: SQL_LOOKUP,
    register_lookup_join: SQL_LOOKUP_JOIN,
    register_async_udf: SQL_ASYNC_UDF,
}


def test_the_knobs_are_declared_once() -> None:
    knobs = {f.name for f in fields(OperatorSettings)}
    for entry, face in FACES.items():
        parameters = inspect.signature(entry).parameters
        assert not knobs & set(parameters), entry.__name__  # none in the signature
        assert parameters["settings"].kind is inspect.Parameter.KEYWORD_ONLY
        assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        assert face.knobs <= knobs and {"capacity", "timeout", "retry"} <= face.knobs


def test_the_object_is_checked_on_construction_and_frozen() -> None:
    with pytest.raises(ValueError, match="capacity must be an int >= 1, got 0"):
        OperatorSettings(capacity=0)
    with pytest.raises(ValueError, match="concurrency must be None, an int >= 1 or 'auto'"):
        OperatorSettings(concurrency=0)
    with pytest.raises(TypeError):
        OperatorSettings(5)  # type: ignore[misc]  # keyword-only
    settings = OperatorSettings(mode="unordered")
    assert settings.mode is OutputMode.UNORDERED
    with pytest.raises(AttributeError):
        settings.capacity = 3  # type: ignore[misc]


def plan_of(df: Any) -> Any:
    stage = stage_of(df)
    assert stage is not None
    return stage.function.args[0]  # partial(enrich_batches | map_batches, plan)


def test_keywords_go_on_top_of_the_object_and_each_face_has_its_default(
    spark: SparkSession,
) -> None:
    df = spark.createDataFrame([(1,)], "order_id long")
    source = FakeSource(schema="name string")
    retry = FixedDelayRetry(2, 0.1)
    given = OperatorSettings(timeout=3.0, retry=retry, on_error="error_column")
    joined = plan_of(lookup_join(df, source, on="order_id", settings=given, error_column="why"))
    assert (joined.settings.timeout, joined.settings.retry) == (3.0, retry)
    assert (joined.settings.on_error, joined.settings.error_column) == ("error_column", "why")
    assert joined.settings.capacity == 131072  # the join's default
    mapped = plan_of(async_map(df, Double(), "doubled long", settings=given, capacity=7))
    assert (mapped.settings.capacity, mapped.settings.timeout) == (7, 3.0)
    assert plan_of(async_map(df, Double(), "doubled long")).settings.capacity == 100


def test_a_face_refuses_the_knobs_it_does_not_take(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1,)], "order_id long")
    source = FakeSource(schema="name string")
    with pytest.raises(TypeError, match=r"lookup_join\(\) got an unexpected keyword argument"):
        lookup_join(df, source, on="order_id", concurrency=4)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="lookup_join takes no concurrency"):
        lookup_join(df, source, on="order_id", settings=OperatorSettings(concurrency=4))
    with pytest.raises(ValueError, match="register_async_udf runs ordered"):
        register_async_udf(
            spark, "f", Double(), "x long", settings=OperatorSettings(mode="unordered")
        )
    with pytest.raises(ValueError, match=r"one of \('fail', 'null', 'error_column'\) for SQL"):
        register_lookup(spark, "g", source, settings=OperatorSettings(on_error="drop"))
    with pytest.raises(ValueError, match="settings must be an OperatorSettings or None"):
        lookup_join(df, source, on="order_id", settings={"capacity": 3})  # type: ignore[arg-type]


def test_the_spark_faces_object_is_the_engines() -> None:
    import enrich.spark
    from enrich.engine.wait_settings import OperatorSettings as Knobs

    assert enrich.spark.OperatorSettings is Knobs
