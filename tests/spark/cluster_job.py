"""A lookup join on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own
Python workers. Run by test_cluster.py in a subprocess (one SparkContext per process).

Usage: python -m tests.spark.cluster_job REDIS_URL  -> prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys

from connectors.redis import RedisLookup
from enrich import LookupCache
from enrich.spark import lookup_join, session, statistics
from tests.spark.sources import PidSource


def main(url: str) -> None:
    spark = session(
        "enrich-cluster-test",
        "local-cluster[2,1,1024]",
        spark__ui__enabled="false",
        spark__executor__memory="512m",
        spark__executorEnv__PYTHONPATH=os.environ.get("PYTHONPATH", ""),
        spark__executorEnv__PYSPARK_PYTHON=sys.executable,
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        users = RedisLookup(url, key_template="user:{}", value="json", schema="name string")
        df = spark.range(0, 400, numPartitions=8).selectExpr("id", "concat('u', id % 4) AS k")
        out = lookup_join(df, users, on="k", cache=LookupCache(max_rows=10), name="users")
        out = lookup_join(out, PidSource(), on="k", name="pids")
        rows = out.collect()
        print(
            json.dumps(
                {
                    "rows": len(rows),
                    "names": sorted({(r.k, r.name) for r in rows}),
                    "pids": len({r.pid for r in rows}),
                    "rows_in": statistics("users").rows_in,
                }
            )
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
