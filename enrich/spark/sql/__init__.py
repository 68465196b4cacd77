"""The SQL forms: lookups as Spark SQL functions (:mod:`.lookup_udf`:
``register_lookup``), a lookup join as a table function (:mod:`.join_table`:
``register_lookup_join``, pyspark >= 4.1), async functions as SQL functions
(:mod:`.async_udf`: ``register_async_udf``), and the pandas form of the functions for
pyspark 3.5 and 4.0 (:mod:`.pandas_udf`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import loader as _loader

if TYPE_CHECKING:
    from .async_udf import register_async_udf as register_async_udf
    from .join_table import register_lookup_join as register_lookup_join
    from .lookup_udf import (
        lookup_struct_type as lookup_struct_type,
        register_lookup as register_lookup,
    )

_LAZY = {
    "register_lookup": ".lookup_udf",
    "lookup_struct_type": ".lookup_udf",
    "register_lookup_join": ".join_table",  # needs Arrow UDTFs (pyspark >= 4.1): loaded on use
    "register_async_udf": ".async_udf",
}

__getattr__ = _loader(__name__, _LAZY, globals())


def _has_arrow_udtfs() -> bool:
    from pyspark.sql import functions

    return hasattr(functions, "arrow_udtf")


# register_lookup_join is served where pyspark has Arrow UDTFs (4.1+) only, so that
# ``from enrich.spark.sql import *`` works on 3.5 and 4.0 too.
__all__ = ("register_lookup", "lookup_struct_type", "register_async_udf") + (
    ("register_lookup_join",) if _has_arrow_udtfs() else ()
)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
