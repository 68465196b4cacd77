"""The settings of a lookup join: one frozen object, validated once, passed whole.

Every entry point (``lookup_rows``, ``lookup_chunks``, ``LookupJoin``,
``enrich.spark.lookup_join``, ``enrich.spark.sql.register_lookup``) keeps its keyword arguments
and builds a :class:`JoinSettings` from them: the operator's knobs as one
:class:`~enrich.engine.wait_settings.OperatorSettings` (checked there, once), with what
only a join has (``how``, the cache, ``max_batch``, the key fields, ``prefix``).
Everything downstream (the join, the operator, the lane, a Spark worker) receives that
object and never checks it again.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.checks import check_choice, check_instance, check_int, short
from ..engine.wait_settings import DEFAULT_CAPACITY, KnobsView, OperatorSettings, WaitSettings

if TYPE_CHECKING:
    from .cache.full import FullCache
    from .cache.lookup_cache import LookupCache

HOWS = ("left", "inner")
DEFAULT_MAX_BATCH = 500
# Rows in flight per task for Spark lookups, unless set. Chunks are a quarter of that
# (32768 rows), more than the 10,000 rows of the Arrow batches Spark hands over
# (spark.sql.execution.arrow.maxRecordsPerBatch), so a chunk is one whole input batch
# and about thirteen batches' requests overlap. Chosen by measurement (lane side by
# side, benchmarks/results/spark.md): 32768 split each batch into 8192 + 1808 rows and
# ran at 0.7-0.8 of this, 65536 at 0.8-0.9; the per-chunk costs (dictionary encoding,
# a future, one decode and one take) favour few, large chunks.
DEFAULT_SPARK_CAPACITY = 131072
# A chunk is a quarter of the capacity, so that about four chunks' requests overlap.
CHUNKS_IN_FLIGHT = 4


def default_capacity(source: Any, cache: Any = None) -> int:
    """The rows in flight per task a Spark join admits when its capacity is not set:
    the source's own ``preferred_capacity`` when it has one (a store that answers a
    bounded number of requests at once advertises what it answers in time: see
    :class:`~enrich.LookupSource`), else :data:`DEFAULT_SPARK_CAPACITY`; and that too
    under a :class:`~enrich.FullCache` (``cache``), which asks the store nothing per row.

    Raises:
        ValueError: the source's ``preferred_capacity`` is not an int >= 1.
    """
    from .cache.full import FullCache

    preferred = getattr(source, "preferred_capacity", None)
    if preferred is None or isinstance(cache, FullCache):
        return DEFAULT_SPARK_CAPACITY
    return check_int(f"{type(source).__name__}.preferred_capacity", preferred)


def chunk_rows(capacity: int) -> int:
    """Rows per chunk for a join with ``capacity`` rows in flight: about four chunks are
    in flight at once, so that their requests overlap. (How many keys go in one request
    is ``max_batch``'s business: a chunk's keys may take several.)"""
    return max(1, capacity // CHUNKS_IN_FLIGHT)


@dataclass(frozen=True, init=False)
class JoinSettings(KnobsView):
    """How a lookup join runs. Keyword-only, frozen, validated on construction, picklable.

    Attributes:
        knobs: the operator's knobs (:class:`~enrich.engine.wait_settings.OperatorSettings`,
            its capacity set), read through the properties below.
        how: "left" keeps rows whose key finds nothing (null fields); "inner" drops them.
        cache: a per-process :class:`~enrich.LookupCache` (partial: LRU and TTL), a
            :class:`~enrich.FullCache` (the whole dimension, reloaded), or None.
        max_batch: keys in one request (one ``lookup_many`` call) at most; a chunk's keys
            may take several requests, and keys of several chunks may share one.
        on: the key fields (row fields or column names), a tuple of one or more; empty
            when the caller hands over keys itself (``lookup_chunks``, the SQL function).
        prefix: put before each dimension field's name in the output.

    Args:
        knobs: the knobs taken whole (default: ``OperatorSettings()``); a knob given
            as a keyword argument (``mode``, ``capacity``, ``timeout``, ``retry``,
            ``on_error``, ``error_column``) goes on top of it. Capacity defaults to 100
            rows (``lookup_rows``'s).

    Raises:
        ValueError: a setting is invalid; the message names the setting and the value.
        TypeError: a keyword argument that is neither a knob nor a join's setting.
    """

    knobs: OperatorSettings
    how: str
    cache: LookupCache | FullCache | None
    max_batch: int
    on: tuple[str, ...]
    prefix: str

    def __init__(
        self,
        *,
        knobs: OperatorSettings | None = None,
        how: str = "left",
        cache: LookupCache | FullCache | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        on: str | Sequence[str] | None = None,
        prefix: str = "",
        **given: Any,
    ) -> None:
        from .cache.full import FullCache
        from .cache.lookup_cache import LookupCache

        operator = OperatorSettings.built(knobs, given, DEFAULT_CAPACITY)
        for knob in ("concurrency", "job_rate_limit"):
            if getattr(operator, knob) is not None:
                raise ValueError(
                    f"a lookup join takes no {knob}: its store sets its own "
                    f"(RedisLookup(..., {knob}=...), HttpLookup(..., {knob}=...))"
                )
        checked = {
            "knobs": operator,
            "how": check_choice("how", how, HOWS),
            "cache": check_instance(
                "cache", cache, (LookupCache, FullCache), "a LookupCache, a FullCache"
            ),
            "max_batch": check_int("max_batch", max_batch),
            "on": _check_on(on),
            "prefix": _check_str("prefix", prefix, empty=True),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def without_cache(self) -> JoinSettings:
        """These settings with ``cache=None`` (a full cache, once its source is wrapped
        in a :class:`~enrich.lookup.cache.full_source.FullCacheSource`, needs no store)."""
        settings = copy.copy(self)
        object.__setattr__(settings, "cache", None)
        return settings

    @property
    def chunk_rows(self) -> int:
        """Rows in one chunk (the operator's record): ``capacity // 4``, at least 1."""
        return chunk_rows(self.capacity)

    def operator(self) -> WaitSettings:
        """The operator's settings for this join: the same capacity in rows (its records,
        chunks, weigh their rows) and timeout (its timer ends a late chunk's rows). Retries
        are the join's own, per key, not the operator's."""
        return WaitSettings.of(self.knobs, retry=None)


def _check_on(on: Any) -> tuple[str, ...]:
    if on is None:
        return ()
    names = (on,) if isinstance(on, str) else on
    if (
        not isinstance(names, (list, tuple))
        or not names
        or not all(isinstance(name, str) and name for name in names)
    ):
        raise ValueError(f"on must be a column name or a list of them, got {short(on)}")
    return tuple(names)


def _check_str(name: str, value: Any, *, empty: bool) -> str:
    if not isinstance(value, str) or not (empty or value):
        what = "a str" if empty else "a non-empty str"
        raise ValueError(f"{name} must be {what}, got {short(value)}")
    return value
