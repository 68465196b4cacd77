"""The Spark entry points build the one settings object: each bad setting is named with
its value on the driver, before any job runs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pyspark.sql import SparkSession

from enrich.spark import lookup_join
from enrich.spark.sql.lookup_udf import register_lookup
from enrich.testing import FakeSource
from tests.lookup.test_join_settings import BAD_SETTINGS, LEAKS

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]

SQL_SETTINGS = {"capacity", "timeout", "retry", "cache", "max_batch", "error_column"}


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [pytest.param(*case, id=f"{case[0]}={case[1]!r}") for case in BAD_SETTINGS],
)
def test_lookup_join_names_each_bad_setting(
    spark: SparkSession, setting: str, value: Any, message: str
) -> None:
    df = spark.createDataFrame([], "user_id string")
    settings: dict[str, Any] = {"on": "user_id", setting: value}
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        lookup_join(df, FakeSource(), **settings)
    assert not any(leak in str(raised.value) for leak in LEAKS)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        pytest.param(*case, id=f"{case[0]}={case[1]!r}")
        for case in BAD_SETTINGS
        if case[0] in SQL_SETTINGS
    ]
    + [
        pytest.param(
            "on_error",
            "drop",
            "on_error must be one of ('fail', 'null', 'error_column') for SQL, got 'drop'",
            id="on_error='drop'",
        ),
        pytest.param("on_error", 5, "for SQL, got 5", id="on_error=5"),
    ],
)
def test_register_lookup_names_each_bad_setting(
    spark: SparkSession, setting: str, value: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        register_lookup(spark, "dim_bad", FakeSource(), **{setting: value})
    assert not any(leak in str(raised.value) for leak in LEAKS)
