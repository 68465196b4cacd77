"""A lookup join driven by batches pushed one at a time (an Arrow UDTF's ``eval``).

``enrich_batches`` pulls its input (``mapInArrow`` hands it an iterator); a table
function is pushed one batch per ``eval`` call and flushed by ``terminate``.
:class:`LanePush` runs the engine's pushed form (:meth:`JoinEngine.pushed
<enrich.lookup.interface.JoinEngine.pushed>`) over those batches: on the columnar lane
each pushed batch's lookups start at once on the runtime loop, the batches whose answers
are in are handed out (in input order), and at most ``capacity`` rows are in flight;
``drain`` hands out the rest. Joins the lane does not take (composite keys, other key
types) run a batch at a time on the per-row engine.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ...lookup.interface import Joined, chunked
from .join_batches import JoinPlan


class LanePush:
    """Runs ``plan`` over pushed batches shaped like ``first`` (see the module docstring)."""

    def __init__(self, plan: JoinPlan, first: pa.RecordBatch) -> None:
        self.plan = plan
        self.schema = pa.schema([*first.schema, *plan.arrow_fields()])
        self.struct_type = plan.struct_type
        self.engine = plan.engine([first.column(i) for i in plan.on])
        self._run = self.engine.pushed()
        self._reported = False

    def push(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """Start ``batch``'s lookups; yield the output of the batches already answered."""
        for joined in self._run.push(self._chunks(batch)):
            yield from self._hand_out(joined)

    def _chunks(self, batch: pa.RecordBatch) -> Iterator[tuple[pa.RecordBatch, object]]:
        return chunked(self.engine, [batch], self.plan.on, self.plan.chunk_rows)

    def drain(self) -> Iterator[pa.RecordBatch]:
        """Yield the output of every batch still in flight, in order."""
        for joined in self._run.drain():
            yield from self._hand_out(joined)
        self._report()

    def close(self) -> None:
        """Cancel what is still in flight (a failed or abandoned task)."""
        self._run.close()
        self._report()

    def _hand_out(self, joined: Joined) -> Iterator[pa.RecordBatch]:
        arrow = joined.arrow(self.struct_type)
        out = self.plan.output(arrow.input_rows(joined.tag), arrow, self.schema)
        if out is not None:
            yield out

    def _report(self) -> None:
        if not self._reported:
            self._reported = True
            self.plan.report(self.engine)
