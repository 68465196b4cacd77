"""The one face of the two lookup engines: chunks of keys in, one joined result per
chunk out (as httpcore's ``interfaces.py`` stands before ``http11`` and ``http2``).

Two engines implement it:

* the per-row engine (:class:`~enrich.lookup.per_row.row_engine.RowEngine`): the
  :class:`~enrich.lookup.per_row.lookup_join.LookupJoin` on the operator, for any key
  (composite keys, any source); a chunk's keys are Python values;
* the columnar lane (:class:`~enrich.lookup.lane.run.ColumnarLane`): Arrow keys of an
  integer or string type and a :class:`~enrich.lookup.contract.columnar_answer.ColumnarSource`;
  a chunk's keys stay an Arrow array.

Both give each row the same outcome, reason and count under the same settings (their
shared tests hold it), so a caller picks one for the keys it has
(:func:`~enrich.lookup.engines.engine_for`) and reads the results the same way: a
:class:`~enrich.lookup.outcome.JoinedChunk` (rows as Python values) or, from the lane, a
:class:`~enrich.lookup.outcome.ColumnarJoined` (one struct per row). What the two share
besides lives below them: the outcomes (:mod:`enrich.lookup.outcome`), the cache's store
and scope (:mod:`enrich.lookup.cache.lookup_cache`), the source contract
(:mod:`enrich.lookup.contract`) and the settings (:mod:`enrich.lookup.join_settings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from ..engine.records.call_metrics import JoinMetrics
from .outcome import ColumnarJoined, JoinedChunk

Joined = JoinedChunk | ColumnarJoined


class JoinRun(Protocol):
    """One run of an engine: the chunks' results, pulled in input order (ORDERED; under
    UNORDERED the per-row engine may hand a chunk's rows out in parts, each with its
    chunk's tag). ``close()`` cancels what is still in flight."""

    def __iter__(self) -> Iterator[Any]: ...

    def __next__(self) -> Any: ...

    def close(self) -> None: ...


@runtime_checkable
class JoinEngine(Protocol):
    """A lookup engine: joins chunks ``(tag, keys)`` with a source's rows.

    Promises of both engines: at most ``capacity`` rows in flight (admitted, not handed
    out); each row's timeout measures the store (its calls and retries' waits, never a
    wait for capacity, a connection, a permit or a load: see
    :mod:`enrich.engine.mailbox.hold`); null keys join nothing and ask nothing; misses
    follow ``how``, errors ``on_error``; every row is counted in :meth:`statistics` (in,
    out, misses, null keys, errors, cache hits, requests).
    """

    def run(self, chunks: Iterable[tuple[Any, Any]]) -> JoinRun:
        """Start joining ``chunks`` (pulled lazily); their results, one or more a chunk."""
        ...

    def statistics(self) -> JoinMetrics:
        """What the engine did so far (a copy)."""
        ...
