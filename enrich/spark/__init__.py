"""Lookup joins on Spark DataFrames, batch and streaming: Flink's async lookup join.

Example::

    from connectors.redis import RedisLookup
    from enrich import LookupCache
    from enrich.spark import EnrichMetricsListener, lookup_join, statistics

    users = RedisLookup("redis://dim:6379/0", key_template="user:{}", value="json",
                        schema="name string, tier string, credit double")
    enriched = lookup_join(orders, users, on="user_id", how="left", capacity=256,
                           timeout=2.0, mode="ordered", name="users",
                           cache=LookupCache(max_rows=100_000, ttl=60))
    spark.streams.addListener(EnrichMetricsListener())   # one log line per batch
    ...
    print(statistics("users").summary())                  # cumulative, on the driver

How it runs: ``mapInArrow`` hands each partition's Arrow batches to the engine on the
worker; rows go to the process's runtime loop (at most ``capacity`` in flight), keys are
coalesced, cached and sent in ``lookup_many`` calls, and output batches (the input rows
plus the dimension columns) are yielded as soon as their rows complete. The runtime
loop, connection pools and cache belong to the Python worker process, so they survive
from task to task and micro-batch to micro-batch (``spark.python.worker.reuse``, on by
default), and are rebuilt when Spark starts a new worker. A micro-batch drains its
in-flight lookups before its task returns; a replayed batch simply looks up again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    import pyspark  # noqa: F401  (checked here: every name below needs it)
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "enrich.spark needs pyspark (and pyarrow, pandas<3): pip install 'spark-enrich[spark]'"
    ) from exc

from .._lazy import loader as _loader

if TYPE_CHECKING:
    from .async_maps.map_frame import async_map as async_map
    from .join.join_frame import lookup_join as lookup_join, route_by_key as route_by_key
    from .metrics.accumulator import (
        EnrichMetricsListener as EnrichMetricsListener,
        batch_statistics as batch_statistics,
        join_names as join_names,
        statistics as statistics,
    )
    from .metrics.observed import observed_statistics as observed_statistics
    from .metrics.serve import MetricsServer as MetricsServer, serve_metrics as serve_metrics
    from .queries.data_sources import register_data_sources as register_data_sources
    from .queries.latency import (
        ProfileRefused as ProfileRefused,
        low_latency as low_latency,
        warm_up as warm_up,
    )
    from .session import session as session
    from .spark_types import spark_type as spark_type
    from .stages.operator_settings import OperatorSettings as OperatorSettings
    from .streams.stream_counts import (
        StreamReadCounts as StreamReadCounts,
        stream_statistics as stream_statistics,
    )

# Where each name lives, imported on first use (PEP 562): a process that runs only the
# Redis data sources (Spark starts their driver-side runner afresh for every streaming
# query) does not load the join, its engine and numpy.
_LAZY = {
    "lookup_join": ".join.join_frame",
    "route_by_key": ".join.join_frame",
    "async_map": ".async_maps.map_frame",
    "statistics": ".metrics.accumulator",
    "batch_statistics": ".metrics.accumulator",
    "join_names": ".metrics.accumulator",
    "EnrichMetricsListener": ".metrics.accumulator",
    "observed_statistics": ".metrics.observed",
    "serve_metrics": ".metrics.serve",
    "MetricsServer": ".metrics.serve",
    "OperatorSettings": ".stages.operator_settings",
    "spark_type": ".spark_types",
    "session": ".session",
    "register_data_sources": ".queries.data_sources",
    "low_latency": ".queries.latency",
    "warm_up": ".queries.latency",
    "ProfileRefused": ".queries.latency",
    "StreamReadCounts": ".streams.stream_counts",
    "stream_statistics": ".streams.stream_counts",
}

__getattr__ = _loader(__name__, _LAZY, globals())


__all__ = (
    # joins and maps on DataFrames, and the knobs they run with
    "lookup_join",
    "route_by_key",
    "async_map",
    "OperatorSettings",
    # metrics
    "statistics",
    "batch_statistics",
    "join_names",
    "observed_statistics",
    "EnrichMetricsListener",
    "StreamReadCounts",
    "stream_statistics",
    "serve_metrics",
    "MetricsServer",
    # the Redis data sources and the low-latency profile
    "register_data_sources",
    "low_latency",
    "warm_up",
    "ProfileRefused",
    # helpers
    "spark_type",
    "session",
)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
