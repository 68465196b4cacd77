"""``ordered_wait`` / ``unordered_wait``: the operator as a plain or async iterator.

The caller's thread pulls inputs and hands them to the runtime loop in chunks, as long
as it holds credit (``capacity`` minus what is in flight); with no credit left it blocks
on the next batch of outputs, which returns credit. That is the backpressure: nothing is
ever buffered beyond ``capacity``.
"""

from __future__ import annotations

import asyncio
import collections
import queue as _queue_mod
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Generator,
    Iterable,
    Iterator,
)
from itertools import chain, islice
from typing import Any

from .clock import Clock, LoopClock
from .function import AsyncFunction, as_async_function
from .model import OperatorStatistics, OutputMode
from .operator import Operator, Weigh
from .retry import RetryStrategy
from .runtime import get_loop, in_loop_thread
from .settings import DEFAULT_CAPACITY, DEFAULT_TIMEOUT, WaitSettings

# Records handed to the loop in one go; bounds the latency of the first outputs.
MAX_CHUNK = 1024


_NOTHING: Any = object()


class _Credit:
    """The capacity not in use, in units: what the consumer may still admit.

    A record weighs ``weigh(value)`` units (1 without ``weigh``). A record heavier than
    what is left waits until enough comes back, unless nothing is in flight (then it is
    admitted alone, so that a record heavier than the capacity cannot stall the run).
    Shared by the sync and the async iterators, so both count alike.
    """

    __slots__ = ("capacity", "left", "weigh")

    def __init__(self, capacity: int, weigh: Weigh | None) -> None:
        self.capacity = capacity
        self.left = capacity
        self.weigh = weigh

    def take(self, value: Any) -> bool:
        """Charge ``value`` if it fits now; False if it must wait for credit."""
        weight = self.weigh(value) if self.weigh is not None else 1
        if weight > self.left and self.left < self.capacity:
            return False
        self.left -= weight
        return True

    def give(self, units: int) -> None:
        self.left += units


class _Run:
    """What a run's generator and its iterator share (kept apart to avoid a reference
    cycle, so a dropped iterator closes its run at once)."""

    __slots__ = ("operator",)

    def __init__(self) -> None:
        self.operator: Operator | None = None

    def statistics(self) -> OperatorStatistics:
        op = self.operator
        return op.statistics() if op is not None else OperatorStatistics()


class AsyncWaitIterator(Iterator[Any]):
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
    ) -> None:
        self.function: Any = None  # set by wrappers that expose their function
        self._run = _Run()
        self._outputs = _run_sync(
            self._run,
            inputs,
            as_async_function(func),
            settings.mode,
            settings.timeout,
            _Credit(settings.capacity, weigh),
            settings.retry,
            clock,
        )
        self._flat: Iterator[Any] = chain.from_iterable(self._outputs)

    def __next__(self) -> Any:
        return next(self._flat)

    def __enter__(self) -> AsyncWaitIterator:
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


def _run_sync(
    run: _Run,
    inputs: Iterable[Any],
    func: AsyncFunction,
    mode: OutputMode,
    timeout: float | None,
    credit: _Credit,
    retry: RetryStrategy | None,
    clock: Clock | None,
) -> Generator[list[Any], None, None]:
    loop = get_loop()
    if in_loop_thread(loop):
        raise RuntimeError(
            "ordered_wait()/unordered_wait() block; on the runtime loop use "
            "ordered_wait_async()/unordered_wait_async()"
        )
    messages: _queue_mod.SimpleQueue[tuple[Any, ...]] = _queue_mod.SimpleQueue()
    op = Operator(
        func,
        mode=mode,
        timeout=timeout,
        retry=retry,
        clock=clock or LoopClock(loop),
        loop=loop,
        post=messages.put,
        weigh=credit.weigh,
    )
    run.operator = op
    asyncio.run_coroutine_threadsafe(op.open(), loop).result()
    source = iter(inputs)
    held = _NOTHING  # an input waiting for credit
    exhausted = False
    ended = False
    try:
        while True:
            if credit.left > 0 and not exhausted:
                if credit.weigh is None:  # every record weighs 1: take them in bulk
                    want = min(credit.left, MAX_CHUNK)
                    chunk = list(islice(source, want))
                    exhausted = len(chunk) < want
                    credit.left -= len(chunk)
                else:
                    chunk = []
                    while len(chunk) < MAX_CHUNK:
                        if held is _NOTHING:
                            held = next(source, _NOTHING)
                            if held is _NOTHING:
                                exhausted = True
                                break
                        if not credit.take(held):
                            break
                        chunk.append(held)
                        held = _NOTHING
                if chunk:
                    loop.call_soon_threadsafe(op.admit, chunk)
                if exhausted:
                    loop.call_soon_threadsafe(op.finish)
                block = credit.left <= 0 or exhausted or held is not _NOTHING
            else:
                block = True
            while True:
                try:
                    message = messages.get() if block else messages.get_nowait()
                except _queue_mod.Empty:
                    break
                kind = message[0]
                if kind == "emit":
                    credit.give(message[2])
                    if message[1]:
                        yield message[1]
                elif kind == "fail":
                    ended = True
                    raise message[1]
                else:
                    ended = True
                    return
                block = False
    finally:
        if not ended:
            _cancel_and_wait(op, loop, messages)


def _cancel_and_wait(
    op: Operator, loop: asyncio.AbstractEventLoop, messages: _queue_mod.SimpleQueue[Any]
) -> None:
    """Stop a run the consumer abandoned, and wait until its function is closed."""
    loop.call_soon_threadsafe(op.cancel)
    while True:
        try:
            kind = messages.get(timeout=30)[0]
        except _queue_mod.Empty:  # pragma: no cover - a close() hook that hangs
            return
        if kind in ("fail", "done"):
            return


def ordered_wait(
    inputs: Iterable[Any],
    func: Any,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    capacity: int = DEFAULT_CAPACITY,
    retry: RetryStrategy | None = None,
    clock: Clock | None = None,
) -> AsyncWaitIterator:
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
    return AsyncWaitIterator(
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
) -> AsyncWaitIterator:
    """Like :func:`ordered_wait`, but outputs come as records complete; no record ever
    crosses a :class:`~enrich.Watermark`, and a watermark follows every record before it."""
    return AsyncWaitIterator(
        inputs,
        func,
        settings=WaitSettings(
            mode=OutputMode.UNORDERED, capacity=capacity, timeout=timeout, retry=retry
        ),
        clock=clock,
    )


class AsyncWaitAsyncIterator(AsyncIterator[Any]):
    """The async twin of :class:`AsyncWaitIterator`: the operator runs on the caller's
    own loop, which is then its mailbox."""

    def __init__(
        self,
        inputs: Iterable[Any] | AsyncIterable[Any],
        func: Any,
        *,
        settings: WaitSettings,
        clock: Clock | None,
        weigh: Weigh | None = None,
    ) -> None:
        self.function: Any = None  # set by wrappers that expose their function
        self._inputs = inputs
        self._func = as_async_function(func)
        self._settings = (settings.mode, settings.timeout, settings.retry, clock)
        self._credit = _Credit(settings.capacity, weigh)
        self._operator: Operator | None = None
        self._outputs = self._run()
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
        op = self._operator
        return op.statistics() if op is not None else OperatorStatistics()

    async def _run(self) -> AsyncGenerator[list[Any], None]:
        loop = asyncio.get_running_loop()
        mode, timeout, retry, clock = self._settings
        messages: collections.deque[tuple[Any, ...]] = collections.deque()
        arrived = asyncio.Event()

        def post(message: tuple[Any, ...]) -> None:
            messages.append(message)
            arrived.set()

        op = Operator(
            self._func,
            mode=mode,
            timeout=timeout,
            retry=retry,
            clock=clock or LoopClock(loop),
            loop=loop,
            post=post,
            weigh=self._credit.weigh,
        )
        self._operator = op
        await op.open()
        # An async input may suspend before its next item: admit each item as it comes,
        # so that none waits for the next one (a plain iterable is taken in chunks).
        most = 1 if isinstance(self._inputs, AsyncIterable) else MAX_CHUNK
        inputs = _aiter(self._inputs)
        credit = self._credit
        held = _NOTHING  # an input waiting for credit
        exhausted = False
        ended = False
        try:
            while True:
                chunk: list[Any] = []
                while credit.left > 0 and not exhausted and len(chunk) < most:
                    if held is _NOTHING:
                        try:
                            held = await inputs.__anext__()
                        except StopAsyncIteration:
                            exhausted = True
                            break
                    if not credit.take(held):
                        break
                    chunk.append(held)
                    held = _NOTHING
                if chunk:
                    op.admit(chunk)
                if exhausted:
                    op.finish()
                waits = credit.left <= 0 or exhausted or held is not _NOTHING
                if not messages and waits:
                    arrived.clear()
                    await arrived.wait()
                while messages:
                    message = messages.popleft()
                    if message[0] == "emit":
                        credit.give(message[2])
                        if message[1]:
                            yield message[1]
                    elif message[0] == "fail":
                        ended = True
                        raise message[1]
                    else:
                        ended = True
                        return
        finally:
            if not ended:
                op.cancel()
                while not ended:
                    while messages:
                        ended = ended or messages.popleft()[0] in ("fail", "done")
                    if not ended:
                        arrived.clear()
                        await arrived.wait()


async def _aiter(inputs: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
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
