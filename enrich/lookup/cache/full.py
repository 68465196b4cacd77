"""Flink's full lookup cache (FLIP-221): a whole dimension held per process, reloaded.

``lookup_join(df, users, on="user_id", cache=FullCache(reload_interval=600))`` loads the
whole dimension into each executor process (a RedisLookup by ``SCAN`` over its key
template's pattern with pipelined reads; an HttpLookup from a list endpoint) and answers
every lookup from memory: a key absent from the snapshot is a miss, with no network
call, as in Flink. The snapshot is reloaded on a schedule (every ``reload_interval``
seconds, or at ``reload_at`` every ``reload_every_days`` days) and the new one replaces
the old at once, in one reference assignment on the runtime loop: a lookup sees the old
dimension or the new one, never a mix. A reload that fails keeps the old snapshot
serving, is logged and counted, and is tried again after ``retry_delay`` seconds.

A load has its own bound, ``load_timeout`` (ten minutes by default), and never counts
against a row's ``timeout``: a row waiting for the first snapshot is held back, not timed
out, as a row waiting for capacity is. A load that outlasts ``load_timeout`` fails with
:class:`LoadTimedOut`, one line naming the store and the bound.

This module holds the settings and the statistics; the snapshot and its loading are
:mod:`enrich.lookup.cache.snapshot`, the source that answers from it
:mod:`enrich.lookup.cache.full_source`. Imports no pyspark.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..._errors import EnrichError
from ...engine.checks import check_choice, check_int, check_positive, check_seconds, short

DEFAULT_MAX_ROWS = 1_000_000
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_PAGE_ROWS = 1_000
DEFAULT_RETRY_DELAY = 10.0
# A healthy load of a million rows takes seconds to tens of seconds on a busy machine; the
# bound is there to end a load that hangs, never to fail a slow one.
DEFAULT_LOAD_TIMEOUT = 600.0
INITIAL_LOADS = ("eager", "lazy")


class DimensionTooLarge(EnrichError):
    """A full cache's dimension outgrew its bound (``max_rows`` or ``max_bytes``).

    Final (not retryable): the load stops at the bound, and trying again finds the same
    dimension. Raise the bound, or use a partial cache (``LookupCache``).
    """

    retryable = False


class LoadTimedOut(EnrichError, TimeoutError):
    """A full cache's load did not end within its ``load_timeout``.

    Final for the rows waiting for it (a store that takes longer than the bound to hand
    over its dimension will take as long again); a reload that times out keeps the old
    snapshot serving and is tried again after ``retry_delay``, as any failed load.
    """

    retryable = False


@dataclass(frozen=True)
class FullCache:
    """Settings of a full lookup cache (Flink's ``lookup.cache = FULL``).

    Args:
        reload_interval: seconds between reloads, from the end of one load to the start
            of the next (Flink's ``full-cache.periodic-reload.interval``); None: no
            periodic reload.
        reload_at: a time of day for the reload, ISO ``"HH:MM[:SS][+HH:MM]"`` (UTC unless
            an offset is given; Flink's ``full-cache.timed-reload.iso-time``).
        reload_every_days: with ``reload_at``, days between reloads
            (``timed-reload.interval-in-days``).
        initial_load: "eager": the first lookup of a process waits for the whole
            dimension (Flink's behaviour); "lazy": the load runs in the background and
            lookups ask the store key by key until the first snapshot is in.
        max_rows: keys a snapshot holds at most; a load that finds more fails with
            :class:`DimensionTooLarge`.
        max_bytes: bytes of stored values (as read from the store, keys included) a
            snapshot holds at most; None: unbounded.
        retry_delay: seconds after a failed load before it is tried again.
        page_rows: keys per ``SCAN`` page and per pipelined read (Redis), rows per page
            of a relational scan; an HTTP list endpoint's pages are the server's own size.
        load_timeout: seconds a load (the first or a reload) may take, from its start to
            its snapshot swapped in; past it the load fails with :class:`LoadTimedOut`.
            It is the load's own bound: waiting for a load never counts against a row's
            ``timeout``.

    ``reload_interval`` and ``reload_at`` exclude each other; with neither, the
    dimension is loaded once per process.
    """

    reload_interval: float | None = None
    reload_at: str | None = None
    reload_every_days: int = 1
    initial_load: str = "eager"
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int | None = DEFAULT_MAX_BYTES
    retry_delay: float = DEFAULT_RETRY_DELAY
    page_rows: int = DEFAULT_PAGE_ROWS
    load_timeout: float = DEFAULT_LOAD_TIMEOUT
    token: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_seconds("reload_interval", self.reload_interval)
        if self.reload_at is not None:
            reload_time(self.reload_at)
            if self.reload_interval is not None:
                raise ValueError(
                    "FullCache takes reload_interval or reload_at, not both: "
                    f"got {self.reload_interval!r} and {self.reload_at!r}"
                )
        check_int("reload_every_days", self.reload_every_days)
        check_choice("initial_load", self.initial_load, INITIAL_LOADS)
        check_int("max_rows", self.max_rows)
        if self.max_bytes is not None:
            check_int("max_bytes", self.max_bytes, rule=">= 1 or None")
        if check_seconds("retry_delay", self.retry_delay) is None:
            raise ValueError("retry_delay must be a number > 0, got None")
        check_int("page_rows", self.page_rows)
        check_positive("load_timeout", self.load_timeout, "a number of seconds")

    def next_reload(self, now: float, wall: float) -> float | None:
        """When the reload after a load ending at ``now`` falls due (clock time), given
        the wall time ``wall`` (epoch seconds) at ``now``; None: no reload."""
        if self.reload_interval is not None:
            return now + self.reload_interval
        if self.reload_at is None:
            return None
        at = reload_time(self.reload_at)
        today = dt.datetime.fromtimestamp(wall, at.tzinfo)
        due = today.replace(hour=at.hour, minute=at.minute, second=at.second, microsecond=0)
        if due.timestamp() <= wall:
            due += dt.timedelta(days=self.reload_every_days)
        return now + (due.timestamp() - wall)


def reload_time(text: Any) -> dt.time:
    """``reload_at`` parsed: an ISO time of day, UTC unless it carries an offset."""
    if not isinstance(text, str):
        raise ValueError(f"reload_at must be a time of day 'HH:MM[:SS][+HH:MM]', got {short(text)}")
    try:
        at = dt.time.fromisoformat(text.removesuffix("Z"))
    except ValueError:
        raise ValueError(
            f"reload_at must be a time of day 'HH:MM[:SS][+HH:MM]', got {short(text)}"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class FullCacheStatistics:
    """Counters of one full cache in one process.

    Attributes:
        loads: snapshots loaded and swapped in.
        failed_loads: loads that failed (the previous snapshot, if any, kept serving).
        rows: keys in the current snapshot.
        bytes: bytes read for the current snapshot (keys and values, as stored).
        memory: about the bytes the current snapshot holds in memory (its Arrow rows
            and its key index).
        version: the current snapshot's number (1 for the first load; 0: none yet).
        last_load_seconds: how long the last successful load took.
        age: seconds since the current snapshot was loaded (None: none yet).
        reloading: whether a load is running now.
        last_error: the last failed load's message, or None.
    """

    loads: int = 0
    failed_loads: int = 0
    rows: int = 0
    bytes: int = 0
    memory: int = 0
    version: int = 0
    last_load_seconds: float | None = None
    age: float | None = None
    reloading: bool = False
    last_error: str | None = None
