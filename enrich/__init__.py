"""spark-enrich: Flink's async I/O and async lookup joins for PySpark, in pure asyncio."""

from __future__ import annotations

from ._errors import (
    DecodeError as DecodeError,
    EnrichError as EnrichError,
    LookupFailed as LookupFailed,
    LookupTimeout as LookupTimeout,
    SchemaError as SchemaError,
    SourceUnavailable as SourceUnavailable,
)
from ._runtime import process_local as process_local
from ._schema import Field as Field, Schema as Schema
from ._source import LookupSource as LookupSource

__all__ = (
    "DecodeError",
    "EnrichError",
    "LookupFailed",
    "LookupTimeout",
    "SchemaError",
    "SourceUnavailable",
    "process_local",
    "Field",
    "Schema",
    "LookupSource",
)
