"""What each supported pyspark offers (3.5 LTS, 4.0, the latest): the compatibility runs
(``./scripts/dev test-compat 3.5|4.0``) run these next to the behaviour tests."""

from __future__ import annotations

import pytest
from pyspark.rdd import PythonEvalType
from pyspark.sql import SparkSession

from enrich.spark import register_data_sources
from enrich.spark.sql.lookup_udf import register_lookup
from enrich.testing import FakeSource
from tests.support.spark_version import spark_version

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]


@pytest.mark.skipif(spark_version() >= (4, 1), reason="pyspark >= 4.1 runs the data sources")
def test_the_data_sources_name_the_spark_they_need(spark: SparkSession) -> None:
    with pytest.raises(RuntimeError, match=r"need Spark 4\.1 or newer \(Python Data Source API"):
        register_data_sources(spark)


def test_the_sql_function_takes_the_udf_kind_of_its_spark(spark: SparkSession) -> None:
    udf = register_lookup(spark, "dim_kind", FakeSource({"a": ("A",)}))
    # 4.1+: an Arrow UDF; before: an iterator pandas UDF on the same lane (sql_pandas).
    old = spark_version() < (4, 1)
    kind = "SQL_SCALAR_PANDAS_ITER_UDF" if old else "SQL_SCALAR_ARROW_ITER_UDF"
    assert udf.evalType == getattr(PythonEvalType, kind)
    row = spark.sql("SELECT dim_kind('a') AS hit, dim_kind('b') AS miss").first()
    assert row is not None and row.hit.value == "A" and row.miss is None
