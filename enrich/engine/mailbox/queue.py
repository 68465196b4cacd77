"""Result queues: the synchronous data structures behind ORDERED and UNORDERED output.

They know nothing about asyncio, time or threads: the operator puts entries, marks them
done, and asks which entries may now be emitted. Both count watermarks as elements
(as Flink's queues do), so ``len(queue)`` is what the capacity bounds.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class Entry:
    """One element of a queue: an input record (or a watermark) and its outputs."""

    __slots__ = (
        "attempt",
        "call",
        "done",
        "group",
        "outputs",
        "segment",
        "task",
        "value",
        "weight",
    )

    def __init__(self, value: Any, weight: int = 1) -> None:
        self.value = value
        # Capacity units the element holds until it leaves (less what it released early).
        self.weight = weight
        self.outputs: list[Any] | None = None
        self.done = False
        # Operator bookkeeping, kept here to need one object per record: the attempt
        # number, the admission group (None for a watermark), and the running task.
        self.attempt = 1
        self.group: Any = None
        self.task: Any = None
        self.call: Any = None  # the call it is part of, when a gate counts calls
        self.segment: _Segment | None = None


class Partial:
    """Outputs that leave apart from their record's entry: a part released early, or the
    outputs of a record done at once. ``units`` is the capacity they free."""

    __slots__ = ("outputs", "units")

    def __init__(self, outputs: list[Any], units: int) -> None:
        self.outputs = outputs
        self.units = units


class OrderedQueue:
    """Emits entries strictly in insertion order: an entry leaves only once it is done
    and every entry put before it has left."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: deque[Entry] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, entry: Entry) -> None:
        self._entries.append(entry)

    def is_clear(self) -> bool:
        """Whether a record done now could leave at once (nothing is ahead of it)."""
        return not self._entries

    def put_watermark(self, entry: Entry, ready: list[Any]) -> None:
        """Put a done watermark entry; appends to ``ready`` what may leave now."""
        entry.done = True
        self._entries.append(entry)
        if self._entries[0] is entry:
            self._pop_done(ready)

    def completed(self, entry: Entry, ready: list[Any]) -> None:
        """``entry`` is done; appends to ``ready`` the entries that may leave now, in order."""
        if self._entries[0] is entry:
            self._pop_done(ready)

    def released(self, entry: Entry, item: Any, ready: list[Any]) -> None:
        """Not supported: under ORDERED a record's outputs leave together, in order."""
        raise RuntimeError("outputs may be released early only in UNORDERED mode")

    def _pop_done(self, ready: list[Any]) -> None:
        entries = self._entries
        while entries and entries[0].done:
            ready.append(entries.popleft())


class _Segment:
    """Records between two watermarks (or a watermark alone) of an unordered queue."""

    __slots__ = ("done", "early", "pending", "watermark")

    def __init__(self, watermark: Entry | None = None) -> None:
        self.watermark = watermark
        self.pending = 0  # records put and not yet done
        self.done: list[Entry] = []  # done records held back behind an earlier segment
        self.early: list[Any] = []  # outputs released early, held back likewise


class UnorderedQueue:
    """Emits records as they complete, but never across a watermark: records put before a
    watermark leave before it, records put after it leave after it, and the watermark
    leaves as soon as every record before it has left."""

    __slots__ = ("_segments", "_size")

    def __init__(self) -> None:
        self._segments: deque[_Segment] = deque([_Segment()])
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def put(self, entry: Entry) -> None:
        tail = self._segments[-1]
        if tail.watermark is not None:
            tail = _Segment()
            self._segments.append(tail)
        tail.pending += 1
        entry.segment = tail
        self._size += 1

    def is_clear(self) -> bool:
        """Whether a record done now could leave at once (no watermark is pending)."""
        return len(self._segments) == 1

    def put_watermark(self, entry: Entry, ready: list[Any]) -> None:
        entry.done = True
        self._segments.append(_Segment(entry))
        self._size += 1
        self._advance(ready)

    def completed(self, entry: Entry, ready: list[Any]) -> None:
        segment = entry.segment
        assert segment is not None
        segment.pending -= 1
        if segment is self._segments[0]:
            self._size -= 1
            ready.append(entry)
            if segment.pending == 0:
                self._advance(ready)
        else:
            segment.done.append(entry)

    def released(self, entry: Entry, item: Any, ready: list[Any]) -> None:
        """Part of the outputs of ``entry`` (not done yet), as ``item``, may leave before
        it: at once if no watermark is ahead of it, else together with its segment's
        records. It is no element of the queue (``len`` is unchanged)."""
        segment = entry.segment
        assert segment is not None
        if segment is self._segments[0]:
            ready.append(item)
        else:
            segment.early.append(item)

    def _advance(self, ready: list[Any]) -> None:
        """Drop finished head segments, releasing the watermarks and records behind them."""
        segments = self._segments
        while len(segments) > 1 and segments[0].pending == 0 and not segments[0].done:
            segments.popleft()
            head = segments[0]
            if head.watermark is not None:
                ready.append(head.watermark)
                self._size -= 1
                head.pending = 0
                # The watermark's segment is finished once emitted; records after it
                # live in the next segment.
                if len(segments) == 1:
                    segments[0] = _Segment()
                continue
            if head.early:
                ready.extend(head.early)
                head.early = []
            if head.done:
                self._size -= len(head.done)
                ready.extend(head.done)
                head.done = []
