"""The one place a join's :class:`~enrich.FullCache` is put in front of its source.

A join given ``cache=FullCache(...)`` asks its source nothing per key: the process's
snapshot answers (:class:`~enrich.lookup.cache.full_source.FullCacheSource`), and no
per-key store is filled. :func:`full_cache_view` makes that swap for both engines
(:func:`enrich.lookup.engines.engine_for`) and for a
:class:`~enrich.lookup.per_row.lookup_join.LookupJoin` built by hand. Imports no pyspark.
"""

from __future__ import annotations

from ..engine.clock import Clock
from .cache.full import FullCache
from .cache.full_source import with_full_cache
from .contract.lookup_source import LookupSource
from .join_settings import JoinSettings


def full_cache_view(
    source: LookupSource, settings: JoinSettings, clock: Clock | None = None
) -> tuple[LookupSource, JoinSettings]:
    """The source and settings a join runs with: under a full cache, ``source``
    answered from the snapshot and the settings without a cache; otherwise both as
    they are."""
    if isinstance(settings.cache, FullCache):
        return with_full_cache(source, settings.cache, clock), settings.without_cache()
    return source, settings
