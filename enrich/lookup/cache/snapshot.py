"""A full cache's snapshot, and the per-process state that loads and reloads it.

A :class:`Snapshot` is immutable once built: the store's answers by store key (for
``lookup_many``), and the single-row answers as one Arrow struct array with each key's
position (for ``lookup_arrow``, answered by one ``take``). A load builds a whole new
snapshot aside; :class:`Dimension` then swaps it in with one assignment on the runtime
loop, the thread every lookup runs on, so a lookup reads one snapshot from start to end.

Schedules run on the injected :class:`~enrich.Clock` (``call_at``), so tests drive
reloads with ``FakeClock.advance`` and never sleep. Imports no pyspark.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ...engine.clock import Clock, Timer
from ..contract.columnar_answer import ColumnarAnswer, tuples_to_struct
from ..contract.lookup_source import ListableSource
from .full import DimensionTooLarge, FullCache, FullCacheStatistics

log = logging.getLogger("enrich.lookup.cache.full")


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One loaded dimension (immutable).

    Attributes:
        version: 1 for a process's first load, then one more per reload.
        loaded_at: clock time the load ended.
        answers: store key -> a row tuple, a list of rows (1:N) or an exception.
        positions: store key -> its row in ``structs`` (single-row keys only).
        structs: the single rows, as ``struct_type``.
        others: store key -> its 1:N rows or its exception.
        size: bytes read for it.
    """

    version: int
    loaded_at: float
    answers: dict[Any, Any]
    positions: dict[Any, int]
    structs: pa.StructArray
    others: dict[Any, Any]
    size: int

    @classmethod
    def of(
        cls, answers: dict[Any, Any], struct_type: pa.StructType, version: int, size: int, at: float
    ) -> Snapshot:
        singles = [key for key, answer in answers.items() if type(answer) is tuple]
        others = {key: answer for key, answer in answers.items() if type(answer) is not tuple}
        structs = tuples_to_struct([answers[key] for key in singles], struct_type)
        positions = dict(zip(singles, range(len(singles)), strict=True))
        return cls(version, at, answers, positions, structs, others, size)

    def answer_arrow(self, store_keys: list[Any], struct_type: pa.StructType) -> ColumnarAnswer:
        """The answer for ``store_keys`` (None: a key that fit no store key, a miss)."""
        if struct_type != self.structs.type:
            raise TypeError(f"snapshot holds {self.structs.type}, asked for {struct_type}")
        found = list(map(self.positions.get, store_keys))
        rows = self.structs.take(pa.array(found, pa.int64()))
        answer = ColumnarAnswer(rows)
        if self.others:
            for position, key in enumerate(store_keys):
                other = self.others.get(key)
                if other is None:
                    continue
                if isinstance(other, BaseException):
                    answer.errors[position] = other
                else:
                    answer.multi[position] = other
        return answer


async def load_snapshot(
    source: ListableSource,
    settings: FullCache,
    struct_type: pa.StructType,
    version: int,
    clock: Clock,
) -> Snapshot:
    """Read the whole dimension into a new snapshot, within the settings' bounds.

    Raises:
        DimensionTooLarge: more than ``max_rows`` keys or ``max_bytes`` bytes.
        Exception: whatever the source raised (the load is abandoned).
    """
    answers: dict[Any, Any] = {}
    size = 0
    async for page, page_bytes in source.scan_dimension(settings.page_rows):
        size += page_bytes
        for key, answer in page.items():
            if answer is None or (type(answer) is list and not answer):
                answers.pop(key, None)  # a miss holds nothing (a key deleted mid-scan)
            else:
                answers[key] = answer
        if len(answers) > settings.max_rows:
            raise DimensionTooLarge(
                f"full cache of {source!r}: the dimension has more than max_rows="
                f"{settings.max_rows} keys; raise max_rows or use a LookupCache"
            )
        if settings.max_bytes is not None and size > settings.max_bytes:
            raise DimensionTooLarge(
                f"full cache of {source!r}: the dimension is larger than max_bytes="
                f"{settings.max_bytes} ({size} bytes read so far, {len(answers)} keys); "
                "raise max_bytes or use a LookupCache"
            )
    # Building the struct array is CPU work: keep it off the loop thread.
    snapshot = await asyncio.to_thread(Snapshot.of, answers, struct_type, version, size, 0.0)
    return replace(snapshot, loaded_at=clock.now())


class Dimension:
    """One full cache's state in one process: the current snapshot, its loads, timers.

    Guarantees: :attr:`snapshot` only ever changes by one assignment on the loop thread,
    to a complete snapshot; a failed load leaves it as it was, is logged and counted,
    and is tried again after ``retry_delay``; at most one load runs at a time.
    """

    def __init__(
        self,
        source: ListableSource,
        settings: FullCache,
        struct_type: pa.StructType,
        clock: Clock,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.source = source
        self.settings = settings
        self.struct_type = struct_type
        self.clock = clock
        self.wall = wall or time.time
        self.loop = asyncio.get_running_loop()
        self.snapshot: Snapshot | None = None
        self._task: asyncio.Task[None] | None = None
        self._timer: Timer | None = None
        self._started = False
        self._loads = 0
        self._failed = 0
        self._last_seconds: float | None = None
        self._last_error: BaseException | None = None

    async def current(self) -> Snapshot | None:
        """The snapshot to answer from. The first call starts the first load; under
        "eager" the calls wait for it (and raise its error if it fails), under "lazy"
        they get None (ask the store) until it is in."""
        if not self._started:
            self.reload()
        snapshot = self.snapshot
        if snapshot is not None or self.settings.initial_load == "lazy":
            return snapshot
        task = self._task
        if task is not None and not task.done():
            await asyncio.shield(task)
            snapshot = self.snapshot
        if snapshot is None:
            error = self._last_error
            assert error is not None
            raise error.with_traceback(None)
        return snapshot

    def reload(self) -> None:
        """Start a load now, unless one runs (on the loop thread)."""
        self._started = True
        self._cancel_timer()
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._load())

    async def wait_loaded(self) -> None:
        """Wait for the load running now, if any, to end (it may have failed: see
        :meth:`statistics`)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.shield(task)

    async def _load(self) -> None:
        clock = self.clock
        started = clock.now()
        version = (self.snapshot.version if self.snapshot is not None else 0) + 1
        try:
            snapshot = await load_snapshot(
                self.source, self.settings, self.struct_type, version, clock
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed += 1
            self._last_error = exc
            kept = "the previous snapshot keeps serving" if self.snapshot else "no snapshot yet"
            log.warning(
                "full cache of %r: load failed (%s: %s); %s; next try in %gs",
                self.source,
                type(exc).__name__,
                exc,
                kept,
                self.settings.retry_delay,
            )
            self._schedule(clock.now() + self.settings.retry_delay)
            return
        self.snapshot = snapshot  # the swap: one assignment, on the loop thread
        self._loads += 1
        self._last_seconds = snapshot.loaded_at - started
        log.info(
            "full cache of %r: loaded version %d, %d keys, %d bytes in %.3fs",
            self.source,
            version,
            len(snapshot.answers),
            snapshot.size,
            self._last_seconds,
        )
        self._schedule(self.settings.next_reload(snapshot.loaded_at, self.wall()))

    def _schedule(self, when: float | None) -> None:
        self._cancel_timer()
        if when is not None:
            self._timer = self.clock.call_at(when, self.reload)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """Stop reloading: cancel the timer and a running load."""
        self._cancel_timer()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def statistics(self) -> FullCacheStatistics:
        snapshot = self.snapshot
        error = self._last_error
        return FullCacheStatistics(
            loads=self._loads,
            failed_loads=self._failed,
            rows=len(snapshot.answers) if snapshot is not None else 0,
            bytes=snapshot.size if snapshot is not None else 0,
            version=snapshot.version if snapshot is not None else 0,
            last_load_seconds=self._last_seconds,
            age=self.clock.now() - snapshot.loaded_at if snapshot is not None else None,
            reloading=self._task is not None and not self._task.done(),
            last_error=f"{type(error).__name__}: {error}" if error is not None else None,
        )
