"""A lookup join driven by batches pushed one at a time (an Arrow UDTF's ``eval``).

``enrich_batches`` pulls its input (``mapInArrow`` hands it an iterator); a table
function is pushed one batch per ``eval`` call and flushed by ``terminate``.
:class:`LanePush` runs the same columnar lane in that form: each pushed batch's lookups
start at once on the runtime loop, the batches whose answers are in are handed out (in
input order), and at most ``capacity`` rows are in flight; ``drain`` hands out the rest.
Joins the lane does not take (composite keys, other key types) run a batch at a time on
the per-row path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import pyarrow as pa

from ...lookup.lane.run import ColumnarLane, LaneChunk
from ...lookup.outcome import JoinedChunk
from .join_batches import JoinPlan, _columnar_batch, _joined_batch, _slices, enrich_batches


class LanePush:
    """Runs ``plan`` over pushed batches shaped like ``first`` (see the module docstring)."""

    def __init__(self, plan: JoinPlan, first: pa.RecordBatch) -> None:
        self.plan = plan
        self.schema = pa.schema([*first.schema, *plan.arrow_fields()])
        self.lane: ColumnarLane | None = plan.lane(first.column(plan.on[0]))
        self._pending: deque[LaneChunk] = deque()
        self._in_flight = 0
        self._reported = False

    def push(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """Start ``batch``'s lookups; yield the output of the batches already answered."""
        lane = self.lane
        if lane is None:
            yield from enrich_batches(self.plan, iter([batch]))
            return
        key = self.plan.on[0]
        for piece in _slices(batch, self.plan.chunk_rows):
            size = piece.num_rows
            if size == 0:
                continue
            pending = self._pending
            while pending and (self._in_flight + size > lane.capacity or pending[0].is_answered()):
                yield from self._hand_out(pending.popleft())
            pending.append(lane.start(piece, piece.column(key)))
            self._in_flight += size

    def drain(self) -> Iterator[pa.RecordBatch]:
        """Yield the output of every batch still in flight, in order."""
        while self._pending:
            yield from self._hand_out(self._pending.popleft())
        if self.lane is not None:  # the cache holds the answers when the task ends, as run()'s
            self.lane.wait_filled()
        self._report()

    def close(self) -> None:
        """Cancel what is still in flight (a failed or abandoned task)."""
        for item in self._pending:
            item.cancel()
        self._pending.clear()
        self._report()

    def _hand_out(self, item: LaneChunk) -> Iterator[pa.RecordBatch]:
        assert self.lane is not None
        self._in_flight -= item.size
        joined = self.lane.finish(item)
        if isinstance(joined, JoinedChunk):
            if joined.indices:
                yield _joined_batch(self.plan, joined, self.schema)
            return
        yield from _columnar_batch(self.plan, joined, self.schema)

    def _report(self) -> None:
        if self.lane is not None and not self._reported:
            self._reported = True
            self.plan.report(self.lane)
