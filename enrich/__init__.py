"""spark-enrich: Flink's async I/O and async lookup joins for PySpark, in pure asyncio.

The engine imports no pyspark; Spark lives in :mod:`enrich.spark` and :mod:`enrich.spark.sql`.
"""

from __future__ import annotations

from ._errors import (
    DecodeError as DecodeError,
    EnrichError as EnrichError,
    LookupFailed as LookupFailed,
    LookupTimeout as LookupTimeout,
    SchemaError as SchemaError,
    SourceUnavailable as SourceUnavailable,
)
from .engine.clock import Clock as Clock, LoopClock as LoopClock
from .engine.function import AsyncFunction as AsyncFunction, ResultFuture as ResultFuture
from .engine.model import (
    OperatorStatistics as OperatorStatistics,
    OutputMode as OutputMode,
    Watermark as Watermark,
)
from .engine.retry import (
    ExponentialBackoffRetry as ExponentialBackoffRetry,
    FixedDelayRetry as FixedDelayRetry,
    RetryStrategy as RetryStrategy,
    is_retryable as is_retryable,
    retry_on_empty as retry_on_empty,
)
from .engine.runtime import pop_process_local as pop_process_local, process_local as process_local
from .engine.wait import (
    AsyncWaitAsyncIterator as AsyncWaitAsyncIterator,
    AsyncWaitIterator as AsyncWaitIterator,
    WaitIterator as WaitIterator,
    ordered_wait as ordered_wait,
    ordered_wait_async as ordered_wait_async,
    unordered_wait as unordered_wait,
    unordered_wait_async as unordered_wait_async,
)
from .lookup.cache import CacheStatistics as CacheStatistics, LookupCache as LookupCache
from .lookup.full_cache import (
    DimensionTooLarge as DimensionTooLarge,
    FullCache as FullCache,
    FullCacheStatistics as FullCacheStatistics,
)
from .lookup.full_source import FullCacheSource as FullCacheSource
from .lookup.iterators import (
    lookup_chunks as lookup_chunks,
    lookup_chunks_async as lookup_chunks_async,
    lookup_rows as lookup_rows,
)
from .lookup.join import LookupJoin as LookupJoin
from .lookup.joined import JoinedChunk as JoinedChunk
from .lookup.metrics import JoinMetrics as JoinMetrics
from .lookup.schema import Field as Field, Schema as Schema, SchemaLike as SchemaLike
from .lookup.settings import chunk_rows as chunk_rows
from .lookup.source import LookupSource as LookupSource

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
    "AsyncWaitIterator",  # the former name of WaitIterator, kept as an alias
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
)
