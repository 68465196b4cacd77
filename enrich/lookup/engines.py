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
from .cache.full import FullCache
from .cache.full_source import with_full_cache
from .cache.lookup_cache import LookupCache
from .contract.columnar_answer import ColumnarSource
from .contract.lookup_source import LookupSource
from .interface import JoinEngine
from .join_settings import JoinSettings
from .lane.run import ColumnarLane, is_columnar_key
from .per_row.row_engine import RowEngine


def columnar_lane(
    source: LookupSource, settings: JoinSettings, keys: Any, key_columns: int = 1
) -> ColumnarLane | None:
    """The columnar lane for key columns like ``keys`` (an Arrow array: the first key
    column; ``key_columns`` 0 when the caller hands over the keys themselves), or None
    when the join takes the per-row engine."""
    if key_columns > 1 or not isinstance(keys, pa.Array) or not is_columnar_key(keys):
        return None
    if isinstance(settings.cache, FullCache):  # the snapshot answers every key
        source = with_full_cache(source, settings.cache)
        settings = settings.without_cache()
    if not isinstance(source, ColumnarSource):
        return None
    # The source decodes by the dimension's own field names, not the output columns'
    # (a prefix renames those).
    return ColumnarLane(
        source,
        pa.struct(list(arrow_schema(source.schema))),
        how=settings.how,
        on_error=settings.on_error,
        cache=settings.cache if isinstance(settings.cache, LookupCache) else None,
        timeout=settings.timeout,
        capacity=settings.capacity,
        max_batch=settings.max_batch,
        metrics=JoinMetrics(),
        retry=settings.retry,
    )


def engine_for(
    source: LookupSource,
    settings: JoinSettings,
    keys: Any = None,
    key_columns: int = 1,
    *,
    clock: Clock | None = None,
) -> JoinEngine:
    """The engine for a join of ``source`` whose keys look like ``keys`` (an Arrow array
    of the first key column, or None: the per-row engine)."""
    lane = columnar_lane(source, settings, keys, key_columns)
    return lane if lane is not None else RowEngine(source, settings, clock=clock)
