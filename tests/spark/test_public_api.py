"""The Spark-facing public API: curated names that exist, and paths users were shown
that still import after the modules moved to rooms of their own (issue 31)."""

from __future__ import annotations

import importlib

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


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("enrich.lookup.arrow_types", "enrich.lookup.dimension.arrow_types", "arrow_type"),
        ("enrich.spark.arrow", "enrich.spark.join.batches", "lookup_structs_for"),
        ("enrich.spark.sql_join", "enrich.spark.sql.join", "register_lookup_join"),
        ("enrich.spark.sql_pandas", "enrich.spark.sql.pandas_udf", "pandas_lookup_udf"),
    ],
)
def test_moved_modules_keep_their_old_paths(old: str, new: str, name: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)
    assert getattr(importlib.import_module(old), name) is getattr(
        importlib.import_module(new), name
    )
