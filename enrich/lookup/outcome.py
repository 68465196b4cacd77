"""What both lookup engines hand out, and the outcomes they share.

A chunk's rows become either a :class:`JoinedChunk` (rows as Python values, assembled
row by row from their keys' outcomes by :func:`assemble`: the per-row join always, the
columnar lane for a chunk with an error, a 1:N key or a timeout) or a
:class:`ColumnarJoined` (one dimension struct per row, taken by index: the columnar
lane's common case). A key's outcome is its rows (a tuple, or a list for 1:N),
:data:`~enrich.lookup.cache.lookup_cache.MISS`, :data:`NULL_KEY` or a
:class:`~enrich.engine.records.failure.Failed`; a miss is offered to a retry strategy's
``retry_on_result`` predicate as :data:`MISS_RESULT` by both engines.

Both results give the same Arrow form (:meth:`JoinedChunk.arrow`,
:meth:`ColumnarJoined.arrow`): an :class:`~enrich.lookup.interface.ArrowJoined`, so
a caller reads either engine's chunks one way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.records.call_metrics import JoinMetrics
from ..engine.records.failure import Failed, error_kind
from ..engine.records.log_limit import LogLimit
from .cache.lookup_cache import MISS

log = logging.getLogger("enrich.lookup")

# Failed rows are logged a few per store and minute in each process (the metrics count
# them all): a store that is down fails every row of every batch.
FAILED_ROWS = LogLimit()

if TYPE_CHECKING:
    import pyarrow as pa

    from .interface import ArrowJoined

NULL_KEY: Any = object()  # a row whose key is null: joins nothing, asks nothing


class _MissResult(list):  # type: ignore[type-arg]
    is_miss = True


MISS_RESULT = _MissResult()  # what a miss looks like to a retry_on_result predicate


@dataclass(slots=True)
class JoinedChunk:
    """The rows a chunk joined to, as columns.

    Attributes:
        tag: the chunk's tag, as given.
        indices: for each output row, the index of its input row in the chunk (in order;
            an index repeats for a 1:N match and is absent for a dropped row).
        rows: for each output row, the dimension values in schema order, or None.
        errors: for each output row, the error reason or None; None as a whole unless
            ``on_error="error_column"``.
    """

    tag: Any
    indices: list[int]
    rows: list[tuple[Any, ...] | None]
    errors: list[str | None] | None

    def arrow(self, struct_type: pa.StructType) -> ArrowJoined:
        """These rows in Arrow form: one ``struct_type`` struct per output row (null
        where ``rows`` has None), the input rows they come from, and the reasons."""
        from .interface import rows_joined

        return rows_joined(self.tag, self.indices, self.rows, self.errors, struct_type)


@dataclass(slots=True)
class ColumnarJoined:
    """A chunk joined on the columnar lane.

    Attributes:
        tag: the chunk's tag, as given.
        structs: one dimension struct per input row (null: nothing joined).
        keep: the rows that stay (an inner join's filter), or None for all of them.
    """

    tag: Any
    structs: pa.StructArray
    keep: pa.Array | None

    def arrow(self, struct_type: pa.StructType) -> ArrowJoined:
        """These rows in Arrow form (``struct_type`` is the lane's own already)."""
        from .interface import ArrowJoined

        if self.keep is None:
            return ArrowJoined(self.tag, None, self.structs, None)
        return ArrowJoined(self.tag, self.keep, self.structs.filter(self.keep), None)


def assemble(
    tag: Any,
    keys: Sequence[Any],
    answers: dict[Any, Any],
    simple: bool,
    how: str,
    policy: str,
    metrics: JoinMetrics,
    only: list[int] | None = None,
    store: str = "",
) -> JoinedChunk:
    """The output rows of a chunk, in row order, from its keys' answers; counts misses,
    null keys and errors in ``metrics``. Raises a row's error under ``policy="fail"``.

    ``simple`` says every answer is a single row (a tuple): then the rows line up with
    the keys as they are. ``only`` restricts the output to those input rows (ascending),
    for a chunk whose rows leave in parts. ``store`` names the source in the log's
    failed-row lines, which :data:`FAILED_ROWS` limits per store.
    """
    positions: list[int] | range
    if only is None:
        outcomes = list(map(answers.__getitem__, keys))
        positions = range(len(outcomes))
    else:
        outcomes = [answers[keys[i]] for i in only]
        positions = only
    count = len(outcomes)
    errors: list[str | None] | None
    if simple:
        errors = [None] * count if policy == "error_column" else None
        metrics.rows_out += count
        return JoinedChunk(tag, list(positions), outcomes, errors)
    left = how == "left"
    indices: list[int] = []
    rows: list[tuple[Any, ...] | None] = []
    errors = [] if policy == "error_column" else None
    for i, state in zip(positions, outcomes, strict=True):
        if type(state) is tuple:
            indices.append(i)
            rows.append(state)
            if errors is not None:
                errors.append(None)
        elif state is MISS or state is NULL_KEY:
            if state is MISS:
                metrics.misses += 1
            else:
                metrics.null_keys += 1
            if left:
                indices.append(i)
                rows.append(None)
                if errors is not None:
                    errors.append(None)
        elif isinstance(state, Failed):
            kind = error_kind(state.error)
            metrics.errors[kind] += 1
            if kind == "timeout":
                metrics.timeouts += 1
            if policy == "fail":
                raise state.error
            held = FAILED_ROWS.admit(store)
            if held is not None:
                # The policy is not named: a job may route an error column elsewhere
                # (its dead letter), and says so in its own lines.
                log.warning(
                    "lookup of row %d failed (%s): %s%s",
                    i,
                    kind,
                    state.error,
                    f" ({held} more failed rows not logged)" if held else "",
                )
            if policy != "drop":
                indices.append(i)
                rows.append(None)
                if errors is not None:
                    errors.append(f"{kind}: {state.error}")
        else:  # several rows: a 1:N match
            for row in state:
                indices.append(i)
                rows.append(row)
                if errors is not None:
                    errors.append(None)
    metrics.rows_out += len(indices)
    return JoinedChunk(tag, indices, rows, errors)


def rows_by_key(keys: Sequence[Any]) -> dict[Any, list[int]]:
    """Each distinct key of a chunk with the rows (ascending) that hold it."""
    out: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        rows = out.get(key)
        if rows is None:
            out[key] = [i]
        else:
            rows.append(i)
    return out


def take_answered(unreleased: dict[Any, list[int]], answers: dict[Any, Any]) -> list[int]:
    """Remove from ``unreleased`` the keys that have an answer; their rows, ascending."""
    ready = [key for key in unreleased if key in answers]
    if len(ready) == 1:
        return unreleased.pop(ready[0])
    return sorted(i for key in ready for i in unreleased.pop(key))


def as_rows(answer: Any) -> Any:
    """A source's answer for one key as cacheable rows: a tuple, a list, or MISS."""
    if answer is None:
        return MISS
    if isinstance(answer, tuple):
        return answer
    if isinstance(answer, list):
        return answer if answer else MISS
    raise TypeError(f"a lookup source answered {answer!r}: expected a tuple, a list or None")
