"""spark-enrich: Flink's async I/O and async lookup joins for PySpark, in pure asyncio.

The engine imports no pyspark; Spark lives in :mod:`enrich.spark` and :mod:`enrich.spark.sql`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import (
    DecodeError as DecodeError,
    EnrichError as EnrichError,
    LookupFailed as LookupFailed,
    LookupTimeout as LookupTimeout,
    SchemaError as SchemaError,
    SourceUnavailable as SourceUnavailable,
)
from ._lazy import loader as _loader

if TYPE_CHECKING:
    from .engine.caller.wait import (
        AsyncWaitAsyncIterator as AsyncWaitAsyncIterator,
        WaitIterator as WaitIterator,
        ordered_wait as ordered_wait,
        ordered_wait_async as ordered_wait_async,
        unordered_wait as unordered_wait,
        unordered_wait_async as unordered_wait_async,
    )
    from .engine.clock import Clock as Clock, LoopClock as LoopClock
    from .engine.function import AsyncFunction as AsyncFunction, ResultFuture as ResultFuture
    from .engine.model import (
        OperatorStatistics as OperatorStatistics,
        OutputMode as OutputMode,
        Watermark as Watermark,
    )
    from .engine.records.call_metrics import JoinMetrics as JoinMetrics
    from .engine.records.record_schema import (
        Field as Field,
        Schema as Schema,
        SchemaLike as SchemaLike,
    )
    from .engine.retry import (
        ExponentialBackoffRetry as ExponentialBackoffRetry,
        FixedDelayRetry as FixedDelayRetry,
        RetryStrategy as RetryStrategy,
        is_retryable as is_retryable,
        retry_on_empty as retry_on_empty,
    )
    from .engine.runtime import (
        pop_process_local as pop_process_local,
        process_local as process_local,
    )
    from .lookup.cache.full import (
        DimensionTooLarge as DimensionTooLarge,
        FullCache as FullCache,
        FullCacheStatistics as FullCacheStatistics,
        LoadTimedOut as LoadTimedOut,
    )
    from .lookup.cache.full_source import FullCacheSource as FullCacheSource
    from .lookup.cache.lookup_cache import (
        CacheStatistics as CacheStatistics,
        LookupCache as LookupCache,
    )
    from .lookup.contract.lookup_source import LookupSource as LookupSource
    from .lookup.iterators import (
        lookup_chunks as lookup_chunks,
        lookup_chunks_async as lookup_chunks_async,
        lookup_rows as lookup_rows,
    )
    from .lookup.join_settings import chunk_rows as chunk_rows
    from .lookup.outcome import JoinedChunk as JoinedChunk
    from .lookup.per_row.lookup_join import LookupJoin as LookupJoin

# Where each public name lives, imported on first use (PEP 562): a process that needs one
# part of the package (the Redis data sources' driver-side runner, which Spark starts
# afresh for every streaming query) does not load the engine, the lookups and numpy.
_LAZY: dict[str, str] = {
    "Clock": ".engine.clock",
    "LoopClock": ".engine.clock",
    "AsyncFunction": ".engine.function",
    "ResultFuture": ".engine.function",
    "OperatorStatistics": ".engine.model",
    "OutputMode": ".engine.model",
    "Watermark": ".engine.model",
    "ExponentialBackoffRetry": ".engine.retry",
    "FixedDelayRetry": ".engine.retry",
    "RetryStrategy": ".engine.retry",
    "is_retryable": ".engine.retry",
    "retry_on_empty": ".engine.retry",
    "pop_process_local": ".engine.runtime",
    "process_local": ".engine.runtime",
    "AsyncWaitAsyncIterator": ".engine.caller.wait",
    "WaitIterator": ".engine.caller.wait",
    "ordered_wait": ".engine.caller.wait",
    "ordered_wait_async": ".engine.caller.wait",
    "unordered_wait": ".engine.caller.wait",
    "unordered_wait_async": ".engine.caller.wait",
    "CacheStatistics": ".lookup.cache.lookup_cache",
    "LookupCache": ".lookup.cache.lookup_cache",
    "DimensionTooLarge": ".lookup.cache.full",
    "FullCache": ".lookup.cache.full",
    "FullCacheStatistics": ".lookup.cache.full",
    "LoadTimedOut": ".lookup.cache.full",
    "FullCacheSource": ".lookup.cache.full_source",
    "lookup_chunks": ".lookup.iterators",
    "lookup_chunks_async": ".lookup.iterators",
    "lookup_rows": ".lookup.iterators",
    "LookupJoin": ".lookup.per_row.lookup_join",
    "JoinedChunk": ".lookup.outcome",
    "JoinMetrics": ".engine.records.call_metrics",
    "Field": ".engine.records.record_schema",
    "Schema": ".engine.records.record_schema",
    "SchemaLike": ".engine.records.record_schema",
    "chunk_rows": ".lookup.join_settings",
    "LookupSource": ".lookup.contract.lookup_source",
}


__all__ = (
    # the operator
    "AsyncFunction",
    "ResultFuture",
    "ordered_wait",
    "unordered_wait",
    "ordered_wait_async",
    "unordered_wait_async",
    "WaitIterator",
    "AsyncWaitAsyncIterator",
    "OutputMode",
    "Watermark",
    "OperatorStatistics",
    # retries
    "RetryStrategy",
    "FixedDelayRetry",
    "ExponentialBackoffRetry",
    "is_retryable",
    "retry_on_empty",
    # time
    "Clock",
    "LoopClock",
    # lookup joins
    "LookupSource",
    "LookupJoin",
    "JoinedChunk",
    "lookup_rows",
    "lookup_chunks",
    "lookup_chunks_async",
    "chunk_rows",
    "LookupCache",
    "CacheStatistics",
    "FullCache",
    "FullCacheStatistics",
    "FullCacheSource",
    "JoinMetrics",
    "Schema",
    "SchemaLike",
    "Field",
    "process_local",
    "pop_process_local",
    # errors
    "EnrichError",
    "LookupTimeout",
    "LookupFailed",
    "SourceUnavailable",
    "DecodeError",
    "SchemaError",
    "DimensionTooLarge",
    "LoadTimedOut",
)


__getattr__ = _loader(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
