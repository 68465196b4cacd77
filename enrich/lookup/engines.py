"""Which of the two lookup engines joins a run's keys: the columnar lane where it takes
them, the per-row engine everywhere else (see :mod:`enrich.lookup.interface`).

The lane takes one key column of an integer or string Arrow type (their distinct values
are the same in Arrow and in Python) from a source that answers Arrow keys
(:class:`~enrich.lookup.contract.columnar_answer.ColumnarSource`); composite keys, other
key types and sources without ``lookup_arrow`` go row by row. Both give every row the
same outcome, so the choice changes speed, never results.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..engine.clock import Clock
from ..engine.records.arrow_types import arrow_schema
from ..engine.records.call_metrics import JoinMetrics
from .contract.columnar_answer import ColumnarSource
from .contract.lookup_source import LookupSource
from .full_view import full_cache_view
from .interface import JoinEngine
from .join_settings import JoinSettings
from .lane.run import ColumnarLane, is_columnar_key
from .per_row.row_engine import RowEngine


def engine_for(
    source: LookupSource,
    settings: JoinSettings,
    keys: Any = None,
    key_columns: int = 1,
    *,
    clock: Clock | None = None,
) -> JoinEngine:
    """The engine for a join of ``source`` whose keys look like ``keys`` (an Arrow array
    of the first key column, or None: the per-row engine; ``key_columns`` 0 when the
    caller hands over the keys themselves)."""
    source, settings = full_cache_view(source, settings, clock)
    if (
        key_columns <= 1
        and isinstance(keys, pa.Array)
        and is_columnar_key(keys)
        and isinstance(source, ColumnarSource)
    ):
        # The source decodes by the dimension's own field names, not the output
        # columns' (a prefix renames those).
        struct_type = pa.struct(list(arrow_schema(source.schema)))
        return ColumnarLane(source, struct_type, settings, metrics=JoinMetrics())
    return RowEngine(source, settings, clock=clock)


def row_engine(
    source: LookupSource, settings: JoinSettings, *, clock: Clock | None = None
) -> RowEngine:
    """The per-row engine for a join of ``source`` (what the async iterators run on)."""
    source, settings = full_cache_view(source, settings, clock)
    return RowEngine(source, settings, clock=clock)
