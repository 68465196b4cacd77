"""The Spark paths per pyspark version, and the cost of the observed metrics.

Run it with each version's interpreter (``.venv-spark35/bin/python -m benchmarks
spark_versions``): it measures, on the pyspark it finds, side by side in one process
and in alternating rounds (best of ``REPEAT``), on ``ROWS`` cached orders over 100,000
Redis keys (``local[2]``, noop sink):

- ``lookup_join`` on its defaults, without and with ``observe=True`` (the metrics rows
  and ``DataFrame.observe`` that streaming joins carry: their cost is the ratio);
- the SQL function from ``register_lookup`` (an Arrow UDF on 4.1+, a pandas UDF on the
  same lane before: :mod:`enrich.spark.sql.pandas_udf`);
- an Arrow passthrough (``mapInArrow`` appending null columns), the floor of any Python
  stage, to compare versions on a shared, noisy machine.

Prints one Markdown table row per path, for docs/spark-versions.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from connectors.redis import RedisLookup
from enrich.demo.local import local_redis

from .lookup import load_users
from .spark import PARTITIONS, SCHEMA, orders, passthrough, start_spark

ROWS = int(os.environ.get("ENRICH_BENCH_SPARK_ROWS", 300_000))
REPEAT = int(os.environ.get("ENRICH_BENCH_REPEAT", 3))


def _nulls(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for batch in batches:
        n = batch.num_rows
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.nulls(n, pa.string()), pa.nulls(n, pa.string())],
            names=[*batch.schema.names, "name", "tier"],
        )


def main() -> None:
    import pyspark

    from enrich.spark import lookup_join
    from enrich.spark.sql.lookup_udf import register_lookup

    spark = start_spark()
    try:
        spark.range(10_000, numPartitions=PARTITIONS).mapInPandas(
            passthrough, "id bigint"
        ).write.format("noop").mode("overwrite").save()  # warm-up: JVM, workers, imports
        with local_redis() as url:
            load_users(url)
            # No timeouts: on a loaded machine a 10 s timeout can fail a run; rates are
            # what is measured here.
            source = RedisLookup(url, key_template="user:{}", value="json", schema=SCHEMA)
            df = orders(spark, ROWS, PARTITIONS, seed=7)
            df.createOrReplaceTempView("bench_orders")
            register_lookup(spark, "dim_bench", source, timeout=None)
            paths: dict[str, Any] = {
                "lookup_join": lookup_join(df, source, on="user_id", timeout=None, observe=False),
                "lookup_join, observed metrics": lookup_join(
                    df, source, on="user_id", timeout=None, observe=True
                ),
                "SQL function": spark.sql("SELECT *, dim_bench(user_id) AS u FROM bench_orders"),
                "Arrow passthrough": df.mapInArrow(
                    _nulls,
                    "order_id bigint, user_id bigint, amount double, name string, tier string",
                ),
            }
            for frame in paths.values():  # warm-up: pools, caches of the plan
                frame.limit(1000).write.format("noop").mode("overwrite").save()
            best = dict.fromkeys(paths, 0.0)
            for _ in range(REPEAT):  # alternating rounds: contention hits every path alike
                for label, frame in paths.items():
                    started = time.perf_counter()
                    frame.write.format("noop").mode("overwrite").save()
                    best[label] = max(best[label], ROWS / (time.perf_counter() - started))
    finally:
        spark.stop()
    floor = best["Arrow passthrough"]
    print(f"pyspark {pyspark.__version__}: {ROWS:,} rows, best of {REPEAT}")
    print("| pyspark | path | rows/s | of the passthrough |")
    for label, rate in best.items():
        print(f"| {pyspark.__version__} | {label} | {rate:,.0f} | {rate / floor:.2f} |")
    plain, observed = best["lookup_join"], best["lookup_join, observed metrics"]
    print(f"observed metrics cost: {1 - observed / plain:+.1%} of lookup_join's rate")


if __name__ == "__main__":
    main()
