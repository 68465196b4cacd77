"""The two drivers of a run: the consumer's non-blocking core (:mod:`.consumer`) on a
thread of its own, or on the operator's loop.

Both turn the one loop of :func:`_step` (admit, finish the input, hand out outputs, say
whether to wait); they differ only in how they wait and how an async input is awaited:
a thread blocks on a thread-safe queue and reaches the runtime loop through
``call_soon_threadsafe``; on the loop, the operator is called directly and an asyncio
event wakes the consumer.
"""

from __future__ import annotations

import asyncio
import collections
import queue as _queue_mod
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Generator, Iterable
from typing import Any

from ..clock import Clock, LoopClock
from ..function import AsyncFunction
from ..mailbox.starter import Gate
from ..model import OperatorStatistics
from ..operator import Operator
from ..runtime import get_loop, in_loop_thread
from ..wait_settings import WaitSettings
from .consumer import Consumer


class Run:
    """What a run's generator and its iterator share (kept apart to avoid a reference
    cycle, so a dropped iterator closes its run at once)."""

    __slots__ = ("operator",)

    def __init__(self) -> None:
        self.operator: Operator | None = None

    def statistics(self) -> OperatorStatistics:
        op = self.operator
        return op.statistics() if op is not None else OperatorStatistics()


_OVER = object()  # the run is over: every output is handed out
_WAIT = object()  # nothing to hand out: wait for the operator's next message
_TAKE = object()  # take the messages that came (none need be waited for), then turn again


def _step(
    consumer: Consumer,
    chunk: list[Any],
    admit: Callable[[list[Any]], Any],
    finish: Callable[[], Any],
) -> list[Any] | object:
    """One turn of the drive loop, the same for both drivers: admit ``chunk`` (if any),
    finish the input when the consumer says so, and say what comes next: a batch of
    outputs to hand out, :data:`_OVER`, :data:`_WAIT` or :data:`_TAKE`."""
    if chunk:
        admit(chunk)
    if consumer.finish_now():
        finish()
    outputs = consumer.next_outputs()
    if outputs is not None:
        return outputs
    if consumer.is_over():
        return _OVER
    return _WAIT if consumer.must_wait() else _TAKE


def run_sync(
    run: Run,
    inputs: Iterable[Any],
    func: AsyncFunction,
    settings: WaitSettings,
    consumer: Consumer,
    clock: Clock | None,
    gate: Gate | None = None,
) -> Generator[list[Any], None, None]:
    """Drive ``consumer`` from the caller's thread; the operator runs on the runtime
    loop, reached through ``call_soon_threadsafe`` and a thread-safe message queue."""
    loop = get_loop()
    if in_loop_thread(loop):
        raise RuntimeError(
            "ordered_wait()/unordered_wait() block; on the runtime loop use "
            "ordered_wait_async()/unordered_wait_async()"
        )
    messages: _queue_mod.SimpleQueue[tuple[Any, ...]] = _queue_mod.SimpleQueue()
    op = _operator(func, settings, clock or LoopClock(loop), loop, messages.put, consumer, gate)
    run.operator = op
    asyncio.run_coroutine_threadsafe(op.open(), loop).result()
    source = iter(inputs)

    def admit(chunk: list[Any]) -> None:
        loop.call_soon_threadsafe(op.admit, chunk)

    def finish() -> None:
        loop.call_soon_threadsafe(op.finish)

    try:
        while True:
            step = _step(consumer, consumer.pull(source), admit, finish)
            if isinstance(step, list):
                yield step
                continue
            if step is _OVER:
                return
            if step is _WAIT:
                consumer.receive(messages.get())
            while True:
                try:
                    consumer.receive(messages.get_nowait())
                except _queue_mod.Empty:
                    break
    finally:
        if not consumer.ended:
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


def _operator(
    func: AsyncFunction,
    settings: WaitSettings,
    clock: Clock,
    loop: asyncio.AbstractEventLoop,
    post: Any,
    consumer: Consumer,
    gate: Gate | None,
) -> Operator:
    return Operator(
        func,
        mode=settings.mode,
        timeout=settings.timeout,
        retry=settings.retry,
        clock=clock,
        loop=loop,
        post=post,
        weigh=consumer.weigh,
        gate=gate,
        batch_size=settings.batch_size,
        batch_wait=settings.batch_wait,
    )


async def run_async(
    run: Run,
    inputs: Iterable[Any] | AsyncIterable[Any],
    func: AsyncFunction,
    settings: WaitSettings,
    consumer: Consumer,
    clock: Clock | None,
    gate: Gate | None = None,
) -> AsyncGenerator[list[Any], None]:
    """Drive ``consumer`` on the caller's loop, which runs the operator too."""
    loop = asyncio.get_running_loop()
    messages: collections.deque[tuple[Any, ...]] = collections.deque()
    arrived = asyncio.Event()

    def post(message: tuple[Any, ...]) -> None:
        messages.append(message)
        arrived.set()

    op = _operator(func, settings, clock or LoopClock(loop), loop, post, consumer, gate)
    run.operator = op
    await op.open()
    # An async input may suspend before its next item: admit each item as it comes, so
    # that none waits for the next one (a plain iterable is taken in chunks).
    source = None if isinstance(inputs, AsyncIterable) else iter(inputs)
    arrivals = inputs.__aiter__() if isinstance(inputs, AsyncIterable) else None

    async def pull() -> list[Any]:
        if arrivals is None:
            assert source is not None
            return consumer.pull(source)
        chunk = consumer.retake()
        if not chunk and consumer.wants_input():
            try:
                item = await arrivals.__anext__()
            except StopAsyncIteration:
                consumer.end_input()
            else:
                chunk = consumer.offer(item)
        return chunk

    try:
        while True:
            step = _step(consumer, await pull(), op.admit, op.finish)
            if isinstance(step, list):
                yield step
                continue
            if step is _OVER:
                return
            if step is _WAIT and not messages:
                arrived.clear()
                await arrived.wait()
            while messages:
                consumer.receive(messages.popleft())
    finally:
        if not consumer.ended:
            op.cancel()
            while not consumer.ended:
                while messages:
                    consumer.receive(messages.popleft())
                if not consumer.ended:
                    arrived.clear()
                    await arrived.wait()
