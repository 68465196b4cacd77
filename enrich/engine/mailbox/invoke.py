"""Invokers: how the operator starts the calls of its function.

One invoker per style of :class:`~.function.AsyncFunction`, chosen once per run:

* :class:`CoroutineInvoker` for ``async def invoke(value)``: each call runs in a task
  of its own whose first step runs eagerly (:mod:`.eager`);
* :class:`CallbackInvoker` for ``async_invoke(value, result)`` (Flink's asyncInvoke);
* :class:`BatchInvoker` for ``async_invoke_many(values, results)`` (a chunk at once).

An invoker starts calls and reports their outcomes to the operator
(:meth:`Operator.complete`); what an outcome means (the first wins, retries, errors) is
the operator's business, not the invoker's. What an invoker may use of its operator is
:class:`Host` (which :class:`~.operator.Operator` is), so this module does not import
the operator's.
"""

from __future__ import annotations

import asyncio
from functools import partial
from itertools import repeat
from typing import Any, Protocol

from ..function import AsyncFunction, ResultFuture, invoke_style
from ..model import Watermark
from ..retry import RetryStrategy
from .eager import EagerRunner
from .output import Output
from .queue import Entry, OrderedQueue, UnorderedQueue
from .timers import Group


class Host(Protocol):
    """What an invoker uses of its operator (see :class:`~.operator.Operator`)."""

    queue: OrderedQueue | UnorderedQueue
    output: Output
    retry: RetryStrategy | None
    weigh: Any
    failed: BaseException | None
    in_flight: int
    peak: int
    completed: int

    def put(self, value: Any, group: Group) -> Entry | None: ...

    def left_at_once(self, value: Any, outputs: list[Any]) -> None: ...

    def complete(
        self, entry: Entry, attempt: int, outputs: Any, error: BaseException | None
    ) -> None: ...

    def on_task_done(self, entry: Entry, attempt: int, task: asyncio.Task[Any]) -> None: ...


class Invoker:
    """Starts calls of ``func`` for the records of ``operator``."""

    __slots__ = ("_func", "_op")

    def __init__(self, func: AsyncFunction, operator: Host) -> None:
        self._func = func
        self._op = operator

    def admit(self, values: list[Any], group: Group) -> None:
        """Queue a chunk of admitted inputs (records and watermarks), start their calls."""
        put = self._op.put
        entries = [entry for entry in map(put, values, repeat(group)) if entry is not None]
        if entries:
            self.start(entries)

    def start(self, entries: list[Entry]) -> None:
        """Start one call for each entry (its attempt number is ``entry.attempt``)."""
        raise NotImplementedError


class CallbackInvoker(Invoker):
    """``func.async_invoke(value, result)`` per record; ``result`` completes it later."""

    __slots__ = ()

    def start(self, entries: list[Entry]) -> None:
        op = self._op
        invoke = self._func.async_invoke
        for entry in entries:
            try:
                invoke(entry.value, ResultFuture(op, entry, entry.attempt))
            except Exception as exc:
                op.complete(entry, entry.attempt, None, exc)
            if op.failed is not None:
                return


class BatchInvoker(Invoker):
    """``func.async_invoke_many(values, results)`` once per chunk of records."""

    __slots__ = ()

    def start(self, entries: list[Entry]) -> None:
        op = self._op
        results = [ResultFuture(op, e, e.attempt) for e in entries]
        try:
            self._func.async_invoke_many([e.value for e in entries], results)
        except Exception as exc:
            for entry in entries:
                op.complete(entry, entry.attempt, None, exc)


class CoroutineInvoker(Invoker):
    """``await func.invoke(value)`` per record, in a task whose first step runs eagerly.

    A record whose coroutine finishes in that first step, with nothing ahead of it in
    the queue and no retry policy to consult, leaves at once: no entry, no queue slot,
    no task kept, no completion bookkeeping.
    """

    __slots__ = ("_runner",)

    def __init__(
        self, func: AsyncFunction, operator: Host, loop: asyncio.AbstractEventLoop
    ) -> None:
        super().__init__(func, operator)
        self._runner = EagerRunner(loop)

    def admit(self, values: list[Any], group: Group) -> None:
        # The hot path of the engine: one pass per record with its state in locals, and
        # the at-once case without a call (`./scripts/dev bench operator` shows both).
        op = self._op
        queue = op.queue
        ready = op.output.ready
        out = op.output.out
        start = self._runner.start
        invoke = self._func.invoke
        at_once = op.retry is None and op.weigh is None
        clear = queue.is_clear() and not ready
        done = 0  # records that left at once since the operator's counters were updated
        for value in values:
            if isinstance(value, Watermark):
                done = _count(op, done)
                op.put(value, group)
                clear = queue.is_clear() and not ready
                continue
            try:
                task, result, error = start(invoke(value))
            except Exception as exc:  # invoke() raised before returning a coroutine
                task, result, error = None, None, exc
            if task is None and error is None and type(result) is list:
                if clear and at_once:
                    out.extend(result)
                    done += 1
                    continue
                if op.retry is None and queue.is_clear():
                    done = _count(op, done)
                    op.left_at_once(value, result)
                    clear = False  # ready holds something now
                    continue
            done = _count(op, done)
            entry = op.put(value, group)
            assert entry is not None
            if task is None:
                op.complete(entry, 1, result, error)
                if op.failed is not None:
                    return
            else:
                entry.task = task
                task.add_done_callback(partial(op.on_task_done, entry, 1))
            clear = queue.is_clear() and not ready
        _count(op, done)

    def start(self, entries: list[Entry]) -> None:
        op = self._op
        start = self._runner.start
        invoke = self._func.invoke
        for entry in entries:
            attempt = entry.attempt
            try:
                task, result, error = start(invoke(entry.value))
            except Exception as exc:  # invoke() raised before returning a coroutine
                task, result, error = None, None, exc
            if task is None:
                op.complete(entry, attempt, result, error)
                if op.failed is not None:
                    return
            else:
                entry.task = task
                task.add_done_callback(partial(op.on_task_done, entry, attempt))


def _count(op: Host, done: int) -> int:
    """Add ``done`` records that left at once to the operator's counters; returns 0."""
    if done:
        op.completed += done
        op.output.out_units += done
        if op.in_flight >= op.peak:
            op.peak = op.in_flight + 1
    return 0


def invoker_for(func: AsyncFunction, operator: Host, loop: asyncio.AbstractEventLoop) -> Invoker:
    """The invoker for ``func``'s style (raises TypeError for a function with none)."""
    style = invoke_style(func)
    if style == "coroutine":
        return CoroutineInvoker(func, operator, loop)
    if style == "callback":
        return CallbackInvoker(func, operator)
    return BatchInvoker(func, operator)
