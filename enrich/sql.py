"""The SQL functions (they live in :mod:`enrich.spark.sql`; this path stays for users):
``register_lookup``, ``register_async_udf`` and ``register_lookup_join``."""

from __future__ import annotations

from .spark.sql.async_udf import register_async_udf as register_async_udf
from .spark.sql.functions import (
    lookup_struct_type as lookup_struct_type,
    register_lookup as register_lookup,
)

__all__ = ("register_lookup", "lookup_struct_type", "register_async_udf")


def __getattr__(name: str) -> object:
    # ``register_lookup_join`` (enrich.spark.sql.join): the table-shaped join needs Arrow
    # UDTFs (pyspark >= 4.1), so it is imported on use only.
    if name == "register_lookup_join":
        from .spark.sql.join import register_lookup_join

        return register_lookup_join
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
