"""Lookup joins as iterators: over chunks of keys (for columnar callers such as Spark),
and over dict rows (for plain Python). Their keys are Python values, so
:func:`enrich.lookup.engines.engine_for` gives them the per-row engine
(:mod:`enrich.lookup.per_row.row_engine`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

from .._errors import DecodeError
from ..engine.caller.wait import AsyncWaitAsyncIterator, WaitIterator
from ..engine.clock import Clock
from ..engine.model import OutputMode
from ..engine.retry import RetryStrategy
from ..engine.wait_settings import DEFAULT_CAPACITY, DEFAULT_TIMEOUT, OperatorSettings
from .cache.full import FullCache
from .cache.lookup_cache import LookupCache
from .contract.lookup_source import LookupSource
from .engines import engine_for, row_engine
from .interface import JoinRun
from .join_settings import DEFAULT_MAX_BATCH, JoinSettings
from .key_rule import admit_keys
from .per_row.row_engine import Chunk

_It = TypeVar("_It", WaitIterator, AsyncWaitAsyncIterator)


def _run(chunks: Any, source: LookupSource, settings: JoinSettings, clock: Clock | None) -> Any:
    return engine_for(source, settings, clock=clock).run(chunks)


def _run_async(
    chunks: Any, source: LookupSource, settings: JoinSettings, clock: Clock | None
) -> AsyncWaitAsyncIterator:
    return row_engine(source, settings, clock=clock).run_async(chunks)


def _chunk_lookups(
    start: Callable[[Any, LookupSource, JoinSettings, Clock | None], _It], name: str, doc: str
) -> Callable[..., _It]:
    """``lookup_chunks`` or its async twin (one signature, one core): the settings built
    and checked once, the run ``start`` makes on the per-row engine."""

    def lookup(
        chunks: Any,
        source: LookupSource,
        *,
        how: str = "left",
        on_error: str = "fail",
        cache: LookupCache | FullCache | None = None,
        mode: OutputMode | str = OutputMode.ORDERED,
        capacity: int = DEFAULT_CAPACITY,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryStrategy | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        clock: Clock | None = None,
    ) -> _It:
        knobs = OperatorSettings(
            mode=mode, capacity=capacity, timeout=timeout, retry=retry, on_error=on_error
        )
        settings = JoinSettings(knobs=knobs, how=how, cache=cache, max_batch=max_batch)
        return start(chunks, source, settings, clock)

    lookup.__name__ = lookup.__qualname__ = name
    lookup.__doc__ = doc
    return lookup


lookup_chunks: Callable[..., WaitIterator] = _chunk_lookups(
    _run,
    "lookup_chunks",
    """Join chunks ``(tag, keys)`` with ``source``; yields ``JoinedChunk`` s.

    The operator's knobs are an :class:`~enrich.engine.wait_settings.OperatorSettings`
    (checked once), the join's settings a :class:`~enrich.lookup.join_settings.JoinSettings`.

    Chunks hold at most ``chunk_rows(capacity)`` keys (a larger one raises
    ``ValueError``); at most ``capacity`` rows are in flight. ORDERED yields one
    ``JoinedChunk`` per chunk, in input order. UNORDERED yields a chunk's rows as they
    are answered: a row answered in time leaves (and frees its unit of capacity)
    without waiting for its chunk-mates, so a chunk may come out in several
    ``JoinedChunk`` s with the same tag, each holding some of its rows in row order.
    The join's metrics: ``iterator.function.statistics()``.

    A key is None (joins nothing), a ``str``, ``int`` (not ``bool``) or ``bytes``, or a
    tuple of them; any other key fails its own row under ``on_error``, with a
    ``DecodeError`` naming the row (its index in the chunk) and the value.

    Raises:
        ValueError: a setting is invalid (the message names it and its value).
    """,
)

lookup_chunks_async: Callable[..., AsyncWaitAsyncIterator] = _chunk_lookups(
    _run_async,
    "lookup_chunks_async",
    """The async twin of :func:`lookup_chunks`, for asyncio programs: the same
    arguments (``chunks`` may also be an async iterable), an async iterator of
    ``JoinedChunk`` s; the caller's loop runs the join.""",
)


def lookup_rows(
    rows: Iterable[dict[str, Any]],
    source: LookupSource,
    *,
    on: str | Sequence[str],
    how: str = "left",
    on_error: str = "fail",
    cache: LookupCache | FullCache | None = None,
    mode: OutputMode | str = OutputMode.ORDERED,
    capacity: int = DEFAULT_CAPACITY,
    timeout: float | None = DEFAULT_TIMEOUT,
    retry: RetryStrategy | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    prefix: str = "",
    error_column: str = "enrich_error",
    clock: Clock | None = None,
) -> Iterator[dict[str, Any]]:
    """Enrich dict rows with the fields their key (``row[on]``) finds in ``source``.

    Each output row is the input row plus the schema's fields (named ``prefix + name``;
    None where nothing was found), plus ``error_column`` with the reason when
    ``on_error="error_column"``. A row missing an ``on`` field raises ``DecodeError``
    naming it; dimension names colliding with the row's raise ``ValueError``.

    A key field holds a ``str``, an ``int`` (not a ``bool``) or ``bytes``; a row whose key
    field holds anything else (``1.0``, ``True``, a date) fails on its own, under
    ``on_error``, with a ``DecodeError`` naming the row, the field and the value
    (see :mod:`enrich.lookup.key_rule`). A null key field makes the row join nothing.

    Raises:
        ValueError: a setting is invalid (the message names it and its value).
    """
    knobs = OperatorSettings(
        mode=mode,
        capacity=capacity,
        timeout=timeout,
        retry=retry,
        on_error=on_error,
        error_column=error_column,
    )
    settings = JoinSettings(
        knobs=knobs, on=on, how=how, cache=cache, max_batch=max_batch, prefix=prefix
    )
    if not settings.on:
        raise ValueError(f"on must be a column name or a list of them, got {on!r}")
    fields = settings.on
    columns = [prefix + name for name in source.schema.names]
    size = settings.chunk_rows

    def key(number: int, row: dict[str, Any]) -> Any:
        try:
            if len(fields) == 1:
                return row[fields[0]]
            parts = tuple(row[f] for f in fields)
        except KeyError as exc:
            raise DecodeError(
                f"row {number} has no field {exc.args[0]!r} (on={on!r}): {row!r}"[:300],
                field=str(exc.args[0]),
                value=row,
            ) from None
        except TypeError:
            raise DecodeError(
                f"row {number} is not a mapping of fields: {row!r}"[:300], value=row
            ) from None
        return None if any(p is None for p in parts) else parts

    def chunked() -> Iterator[Chunk]:
        source_rows = iter(rows)
        number = 0
        while batch := list(islice(source_rows, size)):
            keys = [key(number + i, row) for i, row in enumerate(batch)]
            # Checked here too, so that an error names the row by its number in the run.
            yield batch, admit_keys(keys, fields, first_row=number)
            number += len(batch)

    joined = engine_for(source, settings, clock=clock).run(chunked())
    return dict_rows(joined, columns, error_column)


def dict_rows(joined: JoinRun, columns: list[str], error_column: str) -> Iterator[dict[str, Any]]:
    """The dict rows of a run whose chunks' tags are their input rows: each row with the
    dimension ``columns`` (and ``error_column`` when the run carries reasons)."""
    nulls: tuple[None, ...] = (None,) * len(columns)
    checked = False
    for chunk in joined:
        batch = chunk.tag
        if not checked and batch:
            clash = sorted(set(columns) & set(batch[0]))
            if error_column in batch[0] and chunk.errors is not None:
                clash.append(error_column)
            if clash:
                joined.close()
                raise ValueError(
                    f"dimension fields {clash} collide with the rows' fields; "
                    f"set prefix= (or error_column=) to rename them"
                )
            checked = True
        errors = chunk.errors
        for n, (i, found) in enumerate(zip(chunk.indices, chunk.rows, strict=True)):
            out = dict(batch[i])
            out.update(zip(columns, found if found is not None else nulls, strict=True))
            if errors is not None:
                out[error_column] = errors[n]
            yield out
