"""spark-enrich: Flink's async I/O and async lookup joins for PySpark, in pure asyncio.

The engine imports no pyspark; Spark lives in :mod:`enrich.spark` and :mod:`enrich.sql`.
"""

from __future__ import annotations

from ._clock import Clock as Clock
from ._clock import LoopClock as LoopClock
from ._errors import (
    DecodeError as DecodeError,
)
from ._errors import (
    EnrichError as EnrichError,
)
from ._errors import (
    LookupFailed as LookupFailed,
)
from ._errors import (
    LookupTimeout as LookupTimeout,
)
from ._errors import (
    SchemaError as SchemaError,
)
from ._errors import (
    SourceUnavailable as SourceUnavailable,
)
from ._function import AsyncFunction as AsyncFunction
from ._function import ResultFuture as ResultFuture
from ._model import (
    OperatorStatistics as OperatorStatistics,
)
from ._model import (
    OutputMode as OutputMode,
)
from ._model import (
    Watermark as Watermark,
)
from ._retry import (
    ExponentialBackoffRetry as ExponentialBackoffRetry,
)
from ._retry import (
    FixedDelayRetry as FixedDelayRetry,
)
from ._retry import (
    RetryStrategy as RetryStrategy,
)
from ._retry import (
    is_retryable as is_retryable,
)
from ._retry import (
    retry_on_empty as retry_on_empty,
)
from ._runtime import process_local as process_local
from ._schema import Field as Field
from ._schema import Schema as Schema
from ._source import LookupSource as LookupSource
from ._wait import (
    AsyncWaitAsyncIterator as AsyncWaitAsyncIterator,
)
from ._wait import (
    AsyncWaitIterator as AsyncWaitIterator,
)
from ._wait import (
    ordered_wait as ordered_wait,
)
from ._wait import (
    ordered_wait_async as ordered_wait_async,
)
from ._wait import (
    unordered_wait as unordered_wait,
)
from ._wait import (
    unordered_wait_async as unordered_wait_async,
)

__all__ = (
    # the operator
    "AsyncFunction",
    "ResultFuture",
    "ordered_wait",
    "unordered_wait",
    "ordered_wait_async",
    "unordered_wait_async",
    "AsyncWaitIterator",
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
    # lookups
    "LookupSource",
    "Schema",
    "Field",
    "process_local",
    # errors
    "EnrichError",
    "LookupTimeout",
    "LookupFailed",
    "SourceUnavailable",
    "DecodeError",
    "SchemaError",
)
