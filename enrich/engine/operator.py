"""The async wait operator: Flink's AsyncWaitOperator on one asyncio loop.

Every method runs on the operator's loop thread (the "mailbox"), except
:meth:`Operator.complete_from_any_thread`, which hands a completion over to it. So no
state here needs a lock.

Records are admitted in chunks. A chunk shares one deadline timer (its records were
admitted at the same instant), and outputs are handed to the consumer once per loop
iteration, so the per-record cost is the call itself plus a few attribute writes; each
record still has its own timeout, retries and result.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from functools import partial
from itertools import repeat
from typing import Any

from .._errors import LookupTimeout
from .clock import Clock, Timer
from .eager import EagerRunner
from .function import (
    AsyncFunction,
    ResultFuture,
    has_default_error_handler,
    has_default_timeout,
    invoke_style,
)
from .model import OperatorStatistics, OutputMode, Watermark
from .queue import Entry, OrderedQueue, UnorderedQueue
from .retry import RetryStrategy
from .runtime import maybe_await

log = logging.getLogger("enrich.operator")

# The attempt number of a record that timed out: completions of its earlier attempts
# no longer count, only the timeout hook's.
_TIMED_OUT = 0

# Messages to the consumer: ("emit", outputs, freed) | ("fail", exc) | ("done",), where
# ``freed`` is the capacity units the emitted items held.
Post = Callable[[tuple[Any, ...]], None]
Weigh = Callable[[Any], int]


class _Partial:
    """Outputs that leave apart from their record's entry: a part released early, or the
    outputs of a weighted record done at once. ``units`` is the capacity they free."""

    __slots__ = ("outputs", "units")

    def __init__(self, outputs: list[Any], units: int) -> None:
        self.outputs = outputs
        self.units = units


class _Group:
    """Records admitted together: one deadline, one timer."""

    __slots__ = ("deadline", "entries", "pending", "timer")

    def __init__(self, entries: list[Entry], deadline: float | None) -> None:
        self.entries = entries
        self.deadline = deadline
        self.pending = 0
        self.timer: Timer | None = None


class Operator:
    """Runs ``func`` over admitted records with bounded concurrency.

    Guarantees (each has a test):

    * A record completes once: the first of result, error and timeout wins; later
      completions of the same record are ignored.
    * ORDERED emits records in admission order; UNORDERED emits them as they complete,
      never across a watermark.
    * A deadline or retry timer lives only while a record needs it: none is left once
      every admitted record has completed.
    * A record that ends in an error goes to ``func.handle_error``; if that raises (the
      default), the operator fails: what completed before is emitted, in-flight calls
      are cancelled, timers dropped, ``func.close()`` runs, then the error is posted.

    * ``open()`` and ``close()`` of ``func`` run once per run, whatever ends it (the
      input's end, a failure, or the consumer going away); the cancellations of a run
      that is shutting down are never taken as its records' own outcomes.
    * UNORDERED only: a record may :meth:`release` part of its outputs before it
      completes; they leave as soon as no watermark is ahead of the record, and return
      their share of its capacity at once.

    The caller keeps at most ``capacity`` units admitted and not emitted: a record
    weighs ``weigh(value)`` units (1 without ``weigh``), a watermark 1; the ``freed``
    count of each "emit" message returns credit.
    """

    def __init__(
        self,
        func: AsyncFunction,
        *,
        mode: OutputMode,
        timeout: float | None,
        retry: RetryStrategy | None,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
        post: Post,
        weigh: Weigh | None = None,
    ) -> None:
        self._func = func
        self._weigh = weigh
        self.can_release = mode is OutputMode.UNORDERED
        self._style = invoke_style(func)
        self._runner = EagerRunner(loop)
        self._default_timeout_hook = has_default_timeout(func)
        self._handles_errors = not has_default_error_handler(func)
        self._queue = OrderedQueue() if mode is OutputMode.ORDERED else UnorderedQueue()
        self._timeout = timeout
        self._retry = retry
        self._clock = clock
        self._loop = loop
        self._loop_thread: int | None = None
        self._post = post
        # What may leave, in order: entries, or the outputs of records that finished at
        # once with nothing ahead of them (they never entered the queue).
        self._ready: list[Any] = []
        self._flush_scheduled = False
        self._live: set[_Group] = set()  # groups with records still pending
        self._retry_waits: dict[float, tuple[list[Entry], Timer]] = {}
        self._input_done = False
        self._closing = False
        self._failed: BaseException | None = None
        # Statistics (written on the loop thread only).
        self._in_flight = 0
        self._peak = 0
        self._completed = 0
        self._timeouts = 0
        self._retries = 0
        self._errors = 0

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        self._loop_thread = threading.get_ident()
        await maybe_await(self._func.open())

    def finish(self) -> None:
        """No more input: post "done" once every admitted record has been emitted."""
        self._input_done = True
        self._maybe_finish()

    def cancel(self) -> None:
        """The consumer went away: drop everything in flight and close quietly."""
        if not self._closing:
            self._shut_down(None)

    def statistics(self) -> OperatorStatistics:
        return OperatorStatistics(
            in_flight=self._in_flight,
            peak_in_flight=self._peak,
            completed=self._completed,
            timeouts=self._timeouts,
            retries=self._retries,
            errors=self._errors,
        )

    def has_timers(self) -> bool:
        """Whether any deadline or retry timer is still scheduled."""
        return any(g.timer is not None for g in self._live) or bool(self._retry_waits)

    # -- admission -----------------------------------------------------------------------

    def admit(self, values: list[Any]) -> None:
        """Admit a chunk of inputs (records and watermarks) and start their calls."""
        if self._failed is not None or self._closing:
            return
        # Completions during admission are flushed once at the end, not scheduled each.
        self._flush_scheduled = True
        deadline = None if self._timeout is None else self._clock.now() + self._timeout
        group = _Group([], deadline)
        if self._style == "coroutine":
            self._admit_coroutines(values, group)
        else:
            entries = [entry for entry in map(self._put, values, repeat(group)) if entry]
            if entries:
                self._start(entries)
        if group.pending and self._failed is None:
            self._live.add(group)
            if deadline is not None:
                group.timer = self._clock.call_at(deadline, partial(self._expire, group))
        self._flush()

    def _put(self, value: Any, group: _Group) -> Entry | None:
        """Queue one input; returns its entry if it is a record (watermarks pass)."""
        entry = Entry(value, self._weigh(value) if self._weigh is not None else 1)
        if isinstance(value, Watermark):
            entry.weight = 1
            entry.outputs = [value]
            self._queue.put_watermark(entry, self._ready)
            return None
        entry.group = group
        group.entries.append(entry)
        group.pending += 1
        self._queue.put(entry)
        self._in_flight += 1
        if self._in_flight > self._peak:
            self._peak = self._in_flight
        return entry

    def _admit_coroutines(self, values: list[Any], group: _Group) -> None:
        """Admit and start coroutine-style records one by one. A record whose coroutine
        finishes in its eager first step, with nothing ahead of it in the queue, leaves
        at once: no entry, no queue, no completion bookkeeping."""
        queue = self._queue
        ready = self._ready
        start = self._runner.start
        invoke = self._func.invoke
        plain = self._retry is None
        for value in values:
            if isinstance(value, Watermark):
                self._put(value, group)
                continue
            try:
                task, result, error = start(invoke(value))
            except Exception as exc:  # invoke() raised before returning a coroutine
                task, result, error = None, None, exc
            done_at_once = task is None and error is None and plain and type(result) is list
            if done_at_once and queue.is_clear():
                weigh = self._weigh
                ready.append(result if weigh is None else _Partial(result, weigh(value)))
                self._completed += 1
                if self._in_flight >= self._peak:
                    self._peak = self._in_flight + 1
                continue
            entry = self._put(value, group)
            assert entry is not None
            if task is None:
                self._complete(entry, 1, result, error)
                if self._failed is not None:
                    return
            else:
                entry.task = task
                task.add_done_callback(partial(self._on_task_done, entry, 1))

    def _start(self, entries: list[Entry]) -> None:
        """Start one call for each entry (its attempt number is ``entry.attempt``)."""
        func = self._func
        if self._style == "coroutine":
            start = self._runner.start
            invoke = func.invoke
            complete = self._complete
            for entry in entries:
                attempt = entry.attempt
                try:
                    task, result, error = start(invoke(entry.value))
                except Exception as exc:  # invoke() raised before returning a coroutine
                    task, result, error = None, None, exc
                if task is None:
                    complete(entry, attempt, result, error)
                    if self._failed is not None:
                        return
                else:
                    entry.task = task
                    task.add_done_callback(partial(self._on_task_done, entry, attempt))
        elif self._style == "callback":
            for entry in entries:
                try:
                    func.async_invoke(entry.value, ResultFuture(self, entry, entry.attempt))
                except Exception as exc:
                    self._complete(entry, entry.attempt, None, exc)
                if self._failed is not None:
                    return
        else:
            results = [ResultFuture(self, e, e.attempt) for e in entries]
            try:
                func.async_invoke_many([e.value for e in entries], results)
            except Exception as exc:
                for entry in entries:
                    self._complete(entry, entry.attempt, None, exc)

    # -- completion ----------------------------------------------------------------------

    def complete_from_any_thread(
        self, entry: Entry, attempt: int, outputs: Iterable[Any] | None, error: BaseException | None
    ) -> None:
        if threading.get_ident() == self._loop_thread:
            self._complete(entry, attempt, outputs, error)
        else:
            self._loop.call_soon_threadsafe(self._complete, entry, attempt, outputs, error)

    def release(self, entry: Entry, attempt: int, outputs: Iterable[Any], units: int) -> None:
        """Part of a record's outputs leave now, freeing ``units`` of its capacity."""
        if not self.can_release:
            raise RuntimeError("outputs may be released early only in UNORDERED mode")
        if entry.done or entry.attempt != attempt or self._failed is not None or self._closing:
            return  # the record moved on: its final completion carries its outputs
        units = max(0, min(int(units), entry.weight))
        entry.weight -= units
        self._queue.released(entry, _Partial(list(outputs), units), self._ready)
        if self._ready and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _on_task_done(self, entry: Entry, attempt: int, task: asyncio.Task[Any]) -> None:
        if self._closing:
            return  # cancelled by the shutdown: not the record's own outcome
        if task.cancelled():
            if entry.attempt == attempt and not entry.done:
                # Cancelled by something other than us (we only cancel records that
                # already moved on): that is the call's outcome.
                self._complete(entry, attempt, None, asyncio.CancelledError())
            return
        error = task.exception()
        if error is None:
            self._complete(entry, attempt, task.result(), None)
        else:
            self._complete(entry, attempt, None, error)

    def _complete(
        self, entry: Entry, attempt: int, outputs: Iterable[Any] | None, error: BaseException | None
    ) -> None:
        if entry.done or entry.attempt != attempt or self._failed is not None or self._closing:
            return  # a late or duplicate completion (the first one won), or a shutdown
        entry.task = None
        result: list[Any] = []
        if error is None:
            if isinstance(outputs, list):
                result = outputs
            else:
                try:
                    result = list(outputs)  # type: ignore[arg-type]
                except TypeError:
                    error = TypeError(
                        f"the async function must complete with an iterable of outputs, "
                        f"got {outputs!r} for record {entry.value!r}"
                    )
        retry = self._retry
        if retry is not None and attempt != _TIMED_OUT and attempt < retry.max_attempts:
            try:
                again = (
                    retry.should_retry_exception(error)
                    if error is not None
                    else retry.should_retry_result(result)
                )
            except Exception as exc:
                self._fail(exc)
                return
            if again and self._schedule_retry(entry, attempt, error):
                return
        if error is not None:
            self._errors += 1
            if not self._handles_errors:
                self._fail(error)
                return
            try:
                result = list(self._func.handle_error(entry.value, error))
            except BaseException as raised:
                self._fail(raised)
                return
        entry.outputs = result
        entry.done = True
        self._completed += 1
        group = entry.group
        group.pending -= 1
        if group.pending == 0:
            self._live.discard(group)
            if group.timer is not None:
                group.timer.cancel()
                group.timer = None
        self._queue.completed(entry, self._ready)
        if self._ready and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    # -- retries and timeouts ---------------------------------------------------------

    def _schedule_retry(self, entry: Entry, attempt: int, error: BaseException | None) -> bool:
        """Schedule the next attempt, unless it would start after the record's deadline."""
        assert self._retry is not None
        delay = self._retry.delay(attempt)
        hint = getattr(error, "retry_after", None)
        if isinstance(hint, (int, float)) and hint > delay:
            delay = float(hint)
        when = self._clock.now() + delay
        deadline = entry.group.deadline
        if deadline is not None and when >= deadline:
            return False
        entry.attempt = attempt + 1
        self._retries += 1
        waiting = self._retry_waits.get(when)
        if waiting is None:
            timer = self._clock.call_at(when, partial(self._fire_retries, when))
            self._retry_waits[when] = ([entry], timer)
        else:
            waiting[0].append(entry)
        return True

    def _fire_retries(self, when: float) -> None:
        entries, _ = self._retry_waits.pop(when)
        live = [e for e in entries if not e.done and e.attempt != _TIMED_OUT]
        if live and self._failed is None:
            self._start(live)

    def _expire(self, group: _Group) -> None:
        group.timer = None
        for entry in group.entries:
            if not entry.done and entry.attempt != _TIMED_OUT:
                self._time_out(entry)
                if self._failed is not None:
                    return

    def _time_out(self, entry: Entry) -> None:
        # A retry is never scheduled past the deadline, so a record timing out has a
        # call running (or none, if its function never answers): cancel it.
        self._timeouts += 1
        attempts = entry.attempt
        if entry.task is not None:
            entry.task.cancel()
            entry.task = None
        entry.attempt = _TIMED_OUT
        timeout = self._timeout if self._timeout is not None else float("nan")
        result = ResultFuture(self, entry, _TIMED_OUT)
        if self._default_timeout_hook:
            result.complete_exceptionally(LookupTimeout(entry.value, timeout, attempts))
            return
        try:
            self._func.timeout(entry.value, result)
        except Exception as exc:
            self._fail(exc)

    # -- output and shutdown --------------------------------------------------------------

    def _flush(self) -> None:
        self._flush_scheduled = False
        ready = self._ready
        if ready and self._failed is None:
            self._ready = []
            outputs: list[Any] = []
            records = 0
            freed = 0
            for item in ready:
                kind = type(item)
                if kind is list:
                    outputs.extend(item)
                    freed += 1
                elif kind is _Partial:
                    outputs.extend(item.outputs)
                    freed += item.units
                else:
                    outputs.extend(item.outputs)
                    freed += item.weight
                    if item.group is not None:
                        records += 1
            self._in_flight -= records
            self._post(("emit", outputs, freed))
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        idle = len(self._queue) == 0 and not self._ready
        if idle and self._input_done and not self._closing and self._failed is None:
            self._shut_down(None)

    def _fail(self, error: BaseException) -> None:
        if self._failed is None and not self._closing:
            self._flush()  # what completed before the error still goes out, in order
            self._failed = error
            self._shut_down(error)

    def _shut_down(self, error: BaseException | None) -> None:
        """Cancel what is in flight, close the function, then post the final message.

        Runs once per run: every path to it checks ``_closing`` first."""
        self._closing = True
        for group in self._live:
            if group.timer is not None:
                group.timer.cancel()
                group.timer = None
            for entry in group.entries:
                if entry.task is not None:
                    entry.task.cancel()
                    entry.task = None
        self._live.clear()
        for _, timer in self._retry_waits.values():
            timer.cancel()
        self._retry_waits.clear()
        self._loop.create_task(self._close(error))

    async def _close(self, error: BaseException | None) -> None:
        try:
            await maybe_await(self._func.close())
        except Exception as exc:
            if error is None:
                error = exc
            else:
                log.warning(
                    "close() of %r failed after an earlier error", self._func, exc_info=True
                )
        self._post(("fail", error) if error is not None else ("done",))
