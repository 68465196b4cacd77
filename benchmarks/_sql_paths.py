"""What the relational benchmarks (``benchmarks.postgres``, ``benchmarks.mysql``) share: the
dimension's schema, the orders frame (user ids drawn from the table's), and the join paths raced in
interleaved rounds (``lookup_join`` on its defaults first, beside (b) one statement per
batch, (a) one per row, (c) an Arrow passthrough), reported as medians with each round's rate
and the load average when it ended."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from ._report import best_rate, table, write
from .spark import PARTITIONS, passthrough, sink

SCHEMA = "name string, tier string, credit double"
SELECT = "SELECT id, name, tier, credit FROM users"
JOIN_ROUNDS = 3  # the joins: medians of three interleaved rounds


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
    former: tuple[str, Any, int] | None = None,
) -> tuple[str, dict[str, float]]:
    """The join paths' median rows/s over ``rounds`` interleaved rounds (``lookup_join`` on
    its defaults first in each), as a table (each path beside (a) and (b), with each
    round's rate and the load average when it ended) and figures (``main``, ``a``,
    ``b``, and ``former`` when given).

    Args:
        source: the connector's lookup of ``users`` (``SCHEMA``), on its defaults.
        name: the joins' name prefix (``<name>_warm_up``, ``<name>_bench``).
        per_batch: (b)'s label and its ``mapInPandas`` body.
        per_row: (a)'s label and its UDF body (run on ``udf_rows`` rows).
        former: a label, a source and a capacity for the same join on other settings
            (the defaults it had before), run after the defaults in each round.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from enrich.spark import lookup_join

    df = orders(spark, rows, 7, table_rows)
    small = orders(spark, udf_rows, 8, table_rows)
    sink(lookup_join(small, source, on="user_id", name=f"{name}_warm_up"), udf_rows)  # pools
    enriched = StructType([*df.schema.fields, *StructType.fromDDL(SCHEMA).fields])
    udf = F.udf(per_row[1], "struct<name: string, tier: string, credit: double>")
    main_label = "lookup_join, defaults"
    paths: list[tuple[str, Any, int]] = [
        (main_label, lookup_join(df, source, on="user_id", name=f"{name}_bench"), rows)
    ]
    if former is not None:
        label, earlier, capacity = former
        paths.append(
            (label, lookup_join(df, earlier, on="user_id", capacity=capacity, name=name), rows)
        )
    paths += [
        (per_batch[0], df.mapInPandas(per_batch[1], enriched), rows),
        (per_row[0], small.select("*", udf("user_id").alias("u")), udf_rows),
        ("(c) mapInArrow passthrough, no lookup", df.mapInArrow(passthrough, df.schema), rows),
    ]
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label, *_ in paths}
    for round_ in range(rounds):  # rounds, not repeats: a burst of load spoils one run only
        for label, frame, count in paths:
            rate = best_rate(partial(sink, frame, count), repeat=1)
            load = os.getloadavg()[0]
            runs[label].append((rate, load))
            print(f"  round {round_ + 1}, {label}: {rate:,.0f} rows/s, load {load:.1f}", flush=True)
    df.unpersist()
    small.unpersist()
    rates = {label: statistics.median(r for r, _ in done) for label, done in runs.items()}
    a = rates[per_row[0]]
    b = rates[per_batch[0]]
    lines = [
        [
            label,
            rate,
            rate / a,
            rate / b,
            ", ".join(f"{r:,.0f}" for r, _ in runs[label]),
            ", ".join(f"{load:.1f}" for _, load in runs[label]),
        ]
        for label, rate in rates.items()
    ]
    headers = ["path", "rows/s (median)", "vs (a)", "vs (b)", "rounds (rows/s)", "load (1 min)"]
    figures = {"main": rates[main_label], "a": a, "b": b}
    if former is not None:
        figures["former"] = rates[former[0]]
    return table(headers, lines), figures


def write_joins(
    name: str, title: str, sizes: str, joins: str, checks: list[list[Any]], server: str
) -> None:
    """Write ``benchmarks/results/<name>.md``: the joins' table (``sizes`` its heading),
    the ratios against the targets (``checks``), the rounds, the load and ``server``."""
    load = os.popen("uptime").read().strip()
    path = write(
        name,
        title,
        [
            (f"{sizes}, local[2], noop sink", joins),
            ("Against the targets", table(["ratio", "measured", "target"], checks)),
        ],
        notes=(
            f"Medians of {JOIN_ROUNDS} interleaved rounds, the defaults first in each; the load "
            "column is the 1-minute load average when each round of the path ended. `uptime` "
            f"at the end: {load}. The server: {server}, on loopback, on the same 2 cores as Spark "
            "and the machine's other tenants."
        ),
    )
    print(f"written to {path}")
