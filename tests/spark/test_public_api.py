"""The Spark-facing public API: curated names that exist."""

from __future__ import annotations

import pytest

import enrich.spark
import enrich.spark.sql

pytest.importorskip("pyspark", reason="enrich.spark needs pyspark")


def test_all_names_exist_and_are_unique() -> None:
    for module in (enrich.spark, enrich.spark.sql):
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name} is exported but missing"
    assert {"lookup_join", "async_map"} <= set(enrich.spark.__all__)
    assert "register_async_udf" in enrich.spark.sql.__all__
