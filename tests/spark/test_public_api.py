"""The Spark-facing public API: curated names that exist, and one module path for each
(the old paths of modules that moved are gone, not aliased)."""

from __future__ import annotations

import importlib
import sys

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
    "old",
    [
        "enrich.lookup.arrow_types",
        "enrich.spark.arrow",
        "enrich.spark.sql_join",
        "enrich.spark.sql_pandas",
        "enrich.spark.sink.commit",
    ],
)
def test_moved_modules_have_one_path_only(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_no_import_hook_aliases_module_paths() -> None:
    assert not [finder for finder in sys.meta_path if type(finder).__module__.startswith("enrich")]
