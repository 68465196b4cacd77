"""``ordered_wait`` / ``unordered_wait``: the operator as a plain or async iterator.

The iterators and their entry points; the runs themselves are driven by :mod:`.drive`.
The caller's thread pulls inputs and hands them to the runtime loop in chunks, as long
as it holds credit (``capacity`` minus what is in flight); with no credit left it blocks
on the next batch of outputs, which returns credit. That is the backpressure: nothing is
ever buffered beyond ``capacity``.
"""

from __future__ import annotations

import collections
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
)
from itertools import chain
from typing import Any, TypeVar

from ..clock import Clock
from ..function import as_async_function
from ..mailbox.starter import Gate
from ..model import OperatorStatistics, OutputMode
from ..operator import Operator
from ..retry import RetryStrategy
from ..wait_settings import DEFAULT_CAPACITY, DEFAULT_TIMEOUT, WaitSettings
from .consumer import MAX_CHUNK as MAX_CHUNK, Consumer, Weigh
from .drive import Run, run_async, run_sync


class _RunOutputs:
    """What both iterators share: the run of ``func`` over ``inputs`` with ``settings``,
    driven by the subclass's driver (:func:`~.drive.run_sync` or
    :func:`~.drive.run_async`), and its statistics."""

    _overlap = False  # a consumer on another thread than the operator (see Consumer)

    def __init__(
        self,
        inputs: Iterable[Any] | AsyncIterable[Any],
        func: Any,
        *,
        settings: WaitSettings,
        clock: Clock | None,
        weigh: Weigh | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.function: Any = None  # set by wrappers that expose their function
        self._run = Run()
        consumer = Consumer(settings.capacity, weigh, overlap=self._overlap)
        self._outputs: Any = self._drive(
            self._run, inputs, as_async_function(func), settings, consumer, clock, gate
        )
        self._began()

    _drive: Any  # the driver: run_sync or run_async

    def _began(self) -> None:
        """The subclass's own state, once its run is set up."""

    def statistics(self) -> OperatorStatistics:
        return self._run.statistics()

    @property
    def _operator(self) -> Operator | None:
        return self._run.operator


class WaitIterator(_RunOutputs, Iterator[Any]):
    """The outputs of an operator run, pulled from any thread but the runtime loop's.

    The run starts on the first ``next()``. Breaking out early, ``close()`` or leaving a
    ``with`` block cancels what is in flight and closes the function. ``statistics()``
    may be read at any time, from any thread.
    """

    _overlap = True
    _drive = staticmethod(run_sync)
    _outputs: Generator[list[Any], None, None]

    def _began(self) -> None:
        self._flat: Iterator[Any] = chain.from_iterable(self._outputs)

    def __iter__(self) -> Iterator[Any]:
        # The flattened outputs themselves: a for loop then runs at C speed instead of
        # calling __next__ per output (`./scripts/dev bench operator` shows it). Both
        # read the same stream, so next() and iteration may be mixed.
        return self._flat

    def __next__(self) -> Any:
        return next(self._flat)

    def __enter__(self) -> WaitIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def batches(self) -> Iterator[list[Any]]:
        """The outputs as the lists the operator emits them in (for batch consumers)."""
        return self._outputs

    def close(self) -> None:
        self._outputs.close()


class AsyncWaitAsyncIterator(_RunOutputs, AsyncIterator[Any]):
    """The async twin of :class:`WaitIterator`: the operator runs on the caller's
    own loop, which is then its mailbox (``inputs`` may be an async iterable)."""

    _drive = staticmethod(run_async)
    _outputs: AsyncGenerator[list[Any], None]

    def _began(self) -> None:
        self._pending: collections.deque[Any] = collections.deque()

    def __aiter__(self) -> AsyncWaitAsyncIterator:
        return self

    async def __anext__(self) -> Any:
        while not self._pending:
            self._pending.extend(await self._outputs.__anext__())
        return self._pending.popleft()

    async def aclose(self) -> None:
        await self._outputs.aclose()


async def as_async_iterable(inputs: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    """``inputs`` (a plain or an async iterable) as an async iterator."""
    if isinstance(inputs, AsyncIterable):
        async for item in inputs:
            yield item
    else:
        for item in inputs:
            yield item


_It = TypeVar("_It", WaitIterator, AsyncWaitAsyncIterator)


def _entry(kind: type[_It], mode: OutputMode, name: str, doc: str) -> Callable[..., _It]:
    """One entry point: the operator in ``mode`` as an iterator of ``kind``. The four
    entry points share this one signature and body; only the mode and the iterator (a
    blocking or an async one) differ."""

    def wait(
        inputs: Any,
        func: Any,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        capacity: int = DEFAULT_CAPACITY,
        retry: RetryStrategy | None = None,
        clock: Clock | None = None,
    ) -> _It:
        settings = WaitSettings(mode=mode, capacity=capacity, timeout=timeout, retry=retry)
        return kind(inputs, func, settings=settings, clock=clock)

    wait.__name__ = wait.__qualname__ = name
    wait.__doc__ = doc
    return wait


ordered_wait: Callable[..., WaitIterator] = _entry(
    WaitIterator,
    OutputMode.ORDERED,
    "ordered_wait",
    """Apply ``func`` to every input asynchronously; outputs come in input order.

    Args:
        inputs: any iterable; :class:`~enrich.Watermark` items pass through in place.
        func: an :class:`~enrich.AsyncFunction`, or ``async def f(value) -> iterable``.
        timeout: seconds from a record's first call to its final completion, retries
            included; None for no timeout. On expiry ``func.timeout()`` runs (by default
            raising :class:`~enrich.LookupTimeout`).
        capacity: records in flight at most; a full operator blocks the caller.
        retry: a retry strategy, or None.
        clock: the time source (tests inject ``enrich.testing.FakeClock``).

    Returns:
        A :class:`WaitIterator` of the outputs, flattened (a record completing with
        ``[]`` emits nothing). An error of any record is raised from it, after which the
        run is over.
    """,
)

unordered_wait: Callable[..., WaitIterator] = _entry(
    WaitIterator,
    OutputMode.UNORDERED,
    "unordered_wait",
    """Like :func:`ordered_wait`, but outputs come as records complete; no record ever
    crosses a :class:`~enrich.Watermark`, and a watermark follows every record before it.""",
)

ordered_wait_async: Callable[..., AsyncWaitAsyncIterator] = _entry(
    AsyncWaitAsyncIterator,
    OutputMode.ORDERED,
    "ordered_wait_async",
    """The async twin of :func:`ordered_wait`, for asyncio programs (``inputs`` may be an
    async iterable too); the caller's loop runs the operator.""",
)

unordered_wait_async: Callable[..., AsyncWaitAsyncIterator] = _entry(
    AsyncWaitAsyncIterator,
    OutputMode.UNORDERED,
    "unordered_wait_async",
    """The async twin of :func:`unordered_wait`, for asyncio programs (``inputs`` may be
    an async iterable too); the caller's loop runs the operator.""",
)
