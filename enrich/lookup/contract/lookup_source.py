"""The protocols a dimension store implements to take part in lookup joins: the source
(:class:`LookupSource`), optionally answering key by key (:class:`IncrementalSource`) or
loadable whole by a full cache (:class:`ListableSource`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Hashable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ...engine.records.record_schema import Schema


@runtime_checkable
class LookupSource(Protocol):
    """A dimension store answering batches of key lookups.

    A source object is a picklable *description* (URL, key template, schema, settings):
    it travels to Spark executors. Connections are opened lazily, on the runtime loop of
    the process that uses them, and pooled per process and loop (``enrich.spi.loop_resource``;
    docs/writing-a-connector.md walks through a whole connector).

    ``lookup_many(keys)`` receives distinct keys (a scalar, or a tuple for composite
    keys) and returns a mapping from key to:

    * a tuple of field values in ``schema`` order: the key's row;
    * a list of such tuples: several rows (a 1:N join), possibly empty (a miss);
    * ``None``, or the key absent from the mapping: a miss;
    * an ``Exception`` instance: this key failed on its own (for example a value that
      does not decode, ``DecodeError``); the other keys of the call are unaffected.

    Raising from ``lookup_many`` fails every key of the call (a connection error, a 503);
    the engine's retry and error policy decide what happens to each of their rows. An
    error's ``retryable`` attribute says whether another try may end differently (see
    :func:`enrich.is_retryable`): a value that does not decode is final.

    **Handing answers over as they arrive** (optional, see :class:`IncrementalSource`): a
    source whose keys are answered one by one (per-key requests, pipelines, a cluster's
    per-node commands) should also implement ``lookup_each(keys)``, an async iterator
    yielding partial mappings of the same kind as they arrive. The join then gives each
    row its answer as soon as its key is answered, so a key that hangs costs only its
    own rows (they time out), never its neighbours in the call. A source with only
    ``lookup_many`` works unchanged: its keys are answered when the whole call returns.

    **An in-flight bound of its own** (optional): a source that answers a bounded number
    of requests at once (a connection pool) may define ``preferred_capacity``, an int
    (rows): the rows in flight per task a Spark join admits when its ``capacity`` is not
    set, instead of the Spark default sized for Redis (131072). Advertise what the store
    answers well within the join's timeout on a busy machine (``SqlLookup``: four
    statements of ``max_batch`` keys per pool connection); a ``capacity`` the user sets
    wins, and a join under a ``FullCache`` (no store call per row) ignores it.

    Secrets (passwords, tokens) must never appear in ``repr()``, logs or error messages.
    """

    schema: Schema

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Look up distinct keys in one round trip (or a few, chunked)."""
        ...

    async def aclose(self) -> None:
        """Close this process's connections for the source (they reopen on next use)."""
        ...


@runtime_checkable
class IncrementalSource(LookupSource, Protocol):
    """A :class:`LookupSource` that hands answers over as they arrive.

    ``lookup_each(keys)`` yields mappings from some of ``keys`` to their answers (the
    values ``lookup_many`` may hold), as soon as they are known. Its contract:

    * each key appears in at most one yielded mapping; keys never yielded by the end of
      the iteration are misses (as keys absent from ``lookup_many``'s mapping are);
    * raising from the iterator fails every key not yet yielded (as raising from
      ``lookup_many`` fails every key of the call); the keys already yielded keep their
      answers;
    * the join may stop iterating early (it closes the iterator with ``aclose()``, for
      example when the run ends): release what the call holds in a ``finally``.

    :func:`answers_as_completed` turns per-key awaitables into such an iterator.
    """

    def lookup_each(self, keys: Sequence[Any]) -> AsyncIterator[Mapping[Any, Any]]:
        """Look up distinct keys, yielding partial mappings as the answers arrive."""
        ...


def hands_over_each(source: Any) -> bool:
    """Whether ``source`` implements ``lookup_each`` (answers handed over as they come)."""
    return callable(getattr(source, "lookup_each", None))


async def answers_as_completed(
    calls: Mapping[Any, Awaitable[Any]],
) -> AsyncIterator[dict[Any, Any]]:
    """Run one awaitable per key concurrently; yield ``{key: answer}`` mappings as they
    finish (every answer that finished since the last yield, together).

    An awaitable that raises ends the iteration with its exception (the keys not yet
    yielded then fail, per the :class:`IncrementalSource` contract): catch a key's own
    errors inside it and return them as its answer. The awaitables still running when
    the iteration stops, whatever stops it, are cancelled.
    """
    tasks: dict[asyncio.Future[Any], Any] = {
        asyncio.ensure_future(call): key for key, call in calls.items()
    }
    finished: list[asyncio.Future[Any]] = []
    arrived = asyncio.Event()

    def on_done(task: asyncio.Future[Any]) -> None:
        finished.append(task)
        arrived.set()

    for task in tasks:
        task.add_done_callback(on_done)
    left = len(tasks)
    try:
        while left:
            if not finished:
                arrived.clear()
                await arrived.wait()
            batch, finished[:] = finished[:], []
            left -= len(batch)
            yield {tasks[task]: task.result() for task in batch}
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()  # retrieved: an error left unread is not worth a warning


@runtime_checkable
class ListableSource(Protocol):
    """A source a full cache can load whole.

    ``store_key(key)`` names a lookup key as the store does (raising ``TypeError`` or
    ``ValueError`` for a key that does not fit); ``scan_dimension(page_rows)`` yields
    ``(page, bytes read)`` pairs covering the whole dimension, a page being either

    * a mapping ``{store key: answer}``, answers as ``lookup_many`` gives them; or
    * an Arrow table (or record batch) whose first column holds store keys, each once
      in the whole scan, and whose other columns are the schema's fields in order (one
      row per key): the snapshot is built from its columns with no Python object per
      row, which is how a large dimension loads at the speed of reading it.
    """

    def store_key(self, key: Any) -> Hashable: ...

    def scan_dimension(self, page_rows: int) -> AsyncIterator[tuple[Any, int]]: ...
