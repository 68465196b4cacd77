"""SQL lookup functions (they live in :mod:`enrich.spark.sql`; this path stays for users)."""

from __future__ import annotations

from .spark.sql import (
    lookup_struct_type as lookup_struct_type,
    register_lookup as register_lookup,
)

__all__ = ("register_lookup", "lookup_struct_type")
