"""What the relational benchmarks (``benchmarks.postgres``, ``benchmarks.mysql``) share: the
dimension's schema, the orders frame (user ids drawn from the table's), and the join paths raced in
interleaved rounds (``lookup_join`` beside (b) one statement per batch, (a) one per row,
(c) an Arrow passthrough)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ._report import best_rate, table
from .spark import PARTITIONS, passthrough, sink

SCHEMA = "name string, tier string, credit double"
SELECT = "SELECT id, name, tier, credit FROM users"


def orders(spark: Any, rows: int, seed: int, table_rows: int) -> Any:
    """``rows`` orders (cached) of users drawn from ``table_rows`` ids."""
    from pyspark.sql import functions as F

    df = spark.range(rows, numPartitions=PARTITIONS).select(
        F.col("id").alias("order_id"),
        (F.rand(seed) * table_rows).cast("bigint").alias("user_id"),
    )
    df = df.cache()
    df.count()
    return df


def race_joins(
    spark: Any,
    source: Any,
    *,
    name: str,
    rows: int,
    udf_rows: int,
    table_rows: int,
    rounds: int,
    per_batch: tuple[str, Callable[..., Any]],
    per_row: tuple[str, Callable[[int], Any]],
) -> tuple[str, dict[str, float]]:
    """The join paths' best rows/s over ``rounds`` interleaved rounds, as a table (each
    path beside (a) and (b)) and figures (``main``, ``a``, ``b``).

    Args:
        source: the connector's lookup of ``users`` (``SCHEMA``).
        name: the joins' name prefix (``<name>_warm_up``, ``<name>_bench``).
        per_batch: (b)'s label and its ``mapInPandas`` body.
        per_row: (a)'s label and its UDF body (run on ``udf_rows`` rows).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from enrich.spark import lookup_join

    df = orders(spark, rows, 7, table_rows)
    small = orders(spark, udf_rows, 8, table_rows)
    sink(lookup_join(small, source, on="user_id", name=f"{name}_warm_up"), udf_rows)  # pools
    enriched = StructType([*df.schema.fields, *StructType.fromDDL(SCHEMA).fields])
    udf = F.udf(per_row[1], "struct<name: string, tier: string, credit: double>")
    paths: list[tuple[str, Any, int]] = [
        (
            "lookup_join, defaults",
            lookup_join(df, source, on="user_id", name=f"{name}_bench"),
            rows,
        ),
        (per_batch[0], df.mapInPandas(per_batch[1], enriched), rows),
        (per_row[0], small.select("*", udf("user_id").alias("u")), udf_rows),
        ("(c) mapInArrow passthrough, no lookup", df.mapInArrow(passthrough, df.schema), rows),
    ]
    rates = dict.fromkeys((label for label, *_ in paths), 0.0)
    for round_ in range(rounds):  # rounds, not repeats: a burst of load spoils one run only
        for label, frame, count in paths:
            rate = best_rate(partial(sink, frame, count), repeat=1)
            rates[label] = max(rates[label], rate)
            print(f"  round {round_ + 1}, {label}: {rate:,.0f} rows/s", flush=True)
    df.unpersist()
    small.unpersist()
    main = rates["lookup_join, defaults"]
    a = rates[per_row[0]]
    b = rates[per_batch[0]]
    lines = [[label, r, r / a, r / b] for label, r in rates.items()]
    return table(["path", "rows/s", "vs (a)", "vs (b)"], lines), {"main": main, "a": a, "b": b}
