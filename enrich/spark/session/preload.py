"""What the warm daemon and the fork server import once, before they fork: the modules a
Python process Spark starts would otherwise import itself."""

from __future__ import annotations

import importlib

# What the daemon imports, in this order: what a stage's first batch would otherwise
# import in every fresh worker (``python -X importtime``, 2026-11-27, load ~5:
# pyspark.worker 0.38 s, pandas 0.2 s, aiohttp 0.3 s, pyarrow 0.13-0.19 s, redis.asyncio
# 0.13 s, the join/source/sink modules 0.2-0.5 s on top; 1.7-2.1 s in all). A module not
# installed (an optional extra) is skipped.
PRELOAD: tuple[str, ...] = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.datasource",
    "pyarrow",
    "pyarrow.compute",
    "pandas",
    "orjson",
    "redis.asyncio",
    "aiohttp",
    "confluent_kafka",
    "enrich.engine.runtime",
    "enrich.spark.join.join_batches",
    "enrich.spark.async_maps.map_batches",
    "enrich.spark.streams.read",
    "enrich.spark.sink.redis.data_source",
    "enrich.spark.sink.kafka.alo_sink",
    "enrich.spark.sink.kafka.producing",
    "connectors.redis",
    "connectors.http",
    # What the forked processes still imported themselves (the start trace's imports,
    # 2026-12-06, load ~1: uvloop 0.04-0.24 s in each join worker, the IDNA codec
    # 0.02-0.19 s in each process that opened a Redis connection, the rest 0.01-0.04 s).
    "uvloop",
    "encodings.idna",
    "pyarrow.json",
    "pyarrow.pandas_compat",
    "connectors.redis.arrow",
    "enrich.spark.sink.redis.columns",
    "enrich.spark.metrics.accumulator",
    "enrich.spark.metrics.inbox",
)


def preload(modules: tuple[str, ...] = PRELOAD) -> tuple[str, ...]:
    """Import ``modules`` (skipping those not installed); returns the ones imported."""
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue  # an extra not installed: no stage of this job needs it
        loaded.append(name)
    if "redis.asyncio" in loaded:
        # Every redis-py client looks its own version up in the installed packages'
        # metadata (a scan of sys.path, ~14 ms in a Spark worker): once here, cached
        # for every process forked after.
        from redis.utils import get_lib_version

        get_lib_version()
    return tuple(loaded)
