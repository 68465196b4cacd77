"""``ordered_wait`` / ``unordered_wait``: the operator as a plain or async iterator.

The iterators and their entry points; the runs themselves are driven by :mod:`.drive`.
The caller's thread pulls inputs and hands them to the runtime loop in chunks, as long
as it holds credit (``capacity`` minus what is in flight); with no credit left it blocks
on the next batch of outputs, which returns credit. That is the backpressure: nothing is
ever buffered beyond ``capacity``.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from itertools import chain
from typing import Any

from ..clock import Clock
from ..function import as_async_function
from ..mailbox.starter import Gate
from ..model import OperatorStatistics, OutputMode
from ..operator import Operator
from ..retry import RetryStrategy
from ..wait_settings import DEFAULT_CAPACITY, DEFAULT_TIMEOUT, WaitSettings
from .consumer import MAX_CHUNK as MAX_CHUNK, Consumer, Weigh
from .drive import Run, run_async, run_sync


class WaitIterator(Iterator[Any]):
    """The outputs of an operator run, pulled from any thread but the runtime loop's.

    The run starts on the first ``next()``. Breaking out early, ``close()`` or leaving a
    ``with`` block cancels what is in flight and closes the function. ``statistics()``
    may be read at any time, from any thread.
    """

    def __init__(
        self,
        inputs: Iterable[Any],
        func: Any,
        *,
        settings: WaitSettings,
        clock: Clock | None,
        weigh: Weigh | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.function: Any = None  # set by wrappers that expose their function
        self._run = Run()
        self._outputs = run_sync(
            self._run,
            inputs,
            as_async_function(func),
            settings,
            Consumer(settings.capacity, weigh, overlap=True),
            clock,
            gate,
        )
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

    def statistics(self) -> OperatorStatistics:
        return self._run.statistics()

    @property
    def _operator(self) -> Operator | None:
        return self._run.operator


def ordered_wait(
    inputs: Iterable[Any],
    func: Any,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    capacity: int = DEFAULT_CAPACITY,
    retry: RetryStrategy | None = None,
    clock: Clock | None = None,
) -> WaitIterator:
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
        An iterator of the outputs, flattened (a record completing with ``[]`` emits
        nothing). An error of any record is raised from it, after which the run is over.
    """
    return WaitIterator(
        inputs,
        func,
        settings=WaitSettings(
            mode=OutputMode.ORDERED, capacity=capacity, timeout=timeout, retry=retry
        ),
        clock=clock,
    )


def unordered_wait(
    inputs: Iterable[Any],
    func: Any,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    capacity: int = DEFAULT_CAPACITY,
    retry: RetryStrategy | None = None,
    clock: Clock | None = None,
) -> WaitIterator:
    """Like :func:`ordered_wait`, but outputs come as records complete; no record ever
    crosses a :class:`~enrich.Watermark`, and a watermark follows every record before it."""
    return WaitIterator(
        inputs,
        func,
        settings=WaitSettings(
            mode=OutputMode.UNORDERED, capacity=capacity, timeout=timeout, retry=retry
        ),
        clock=clock,
    )


class AsyncWaitAsyncIterator(AsyncIterator[Any]):
    """The async twin of :class:`WaitIterator`: the operator runs on the caller's
    own loop, which is then its mailbox."""

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
        self._outputs = run_async(
            self._run,
            inputs,
            as_async_function(func),
            settings,
            Consumer(settings.capacity, weigh),
            clock,
            gate,
        )
        self._pending: collections.deque[Any] = collections.deque()

    def __aiter__(self) -> AsyncWaitAsyncIterator:
        return self

    async def __anext__(self) -> Any:
        while not self._pending:
            self._pending.extend(await self._outputs.__anext__())
        return self._pending.popleft()

    async def aclose(self) -> None:
        await self._outputs.aclose()

    def statistics(self) -> OperatorStatistics:
        return self._run.statistics()

    @property
    def _operator(self) -> Operator | None:
        return self._run.operator


async def as_async_iterable(inputs: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    """``inputs`` (a plain or an async iterable) as an async iterator."""
    if isinstance(inputs, AsyncIterable):
        async for item in inputs:
            yield item
    else:
        for item in inputs:
            yield item


def ordered_wait_async(
    inputs: Iterable[Any] | AsyncIterable[Any],
    func: Any,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    capacity: int = DEFAULT_CAPACITY,
    retry: RetryStrategy | None = None,
    clock: Clock | None = None,
) -> AsyncWaitAsyncIterator:
    """The async twin of :func:`ordered_wait`, for asyncio programs."""
    return AsyncWaitAsyncIterator(
        inputs,
        func,
        settings=WaitSettings(
            mode=OutputMode.ORDERED, capacity=capacity, timeout=timeout, retry=retry
        ),
        clock=clock,
    )


def unordered_wait_async(
    inputs: Iterable[Any] | AsyncIterable[Any],
    func: Any,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    capacity: int = DEFAULT_CAPACITY,
    retry: RetryStrategy | None = None,
    clock: Clock | None = None,
) -> AsyncWaitAsyncIterator:
    """The async twin of :func:`unordered_wait`, for asyncio programs."""
    return AsyncWaitAsyncIterator(
        inputs,
        func,
        settings=WaitSettings(
            mode=OutputMode.UNORDERED, capacity=capacity, timeout=timeout, retry=retry
        ),
        clock=clock,
    )
