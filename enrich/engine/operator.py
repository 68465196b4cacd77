"""The async wait operator: Flink's AsyncWaitOperator on one asyncio loop.

Every method runs on the operator's loop thread (the "mailbox"), except
:meth:`Operator.complete_from_any_thread`, which hands a completion over to it. So no
state here needs a lock.

The operator owns the records' completion: the first outcome wins, retries, timeouts,
errors and the result queue. How a call starts is the invoker's job
(:mod:`.invoke`, chosen once per run from the function's style); deadline and retry
timers are kept by :class:`~.timers.Timers` on the injected clock; when a retry starts
is the retry strategy's to say; what may leave waits in an :class:`~.output.Output`.

Outputs are handed to the consumer once per loop iteration, so the per-record cost is
the call itself plus a few attribute writes; each record still has its own timeout,
retries and result.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .._errors import LookupTimeout
from .clock import Clock
from .function import AsyncFunction, ResultFuture, has_default_error_handler, has_default_timeout
from .mailbox.hold import Hold, reset_hold, set_hold
from .mailbox.invoke import invoker_for
from .mailbox.output import Output
from .mailbox.queue import Entry, OrderedQueue, Partial, UnorderedQueue
from .mailbox.starter import Gate, Starter
from .mailbox.timers import Group, Timers
from .model import OperatorStatistics, OutputMode, Watermark
from .retry import RetryStrategy
from .runtime import maybe_await

log = logging.getLogger("enrich.operator")

# The attempt number of a record that timed out: completions of its earlier attempts
# no longer count, only the timeout hook's.
TIMED_OUT = 0

# Messages to the consumer: ("emit", outputs, freed) | ("fail", exc) | ("done",), where
# ``freed`` is the capacity units the emitted items held.
Post = Callable[[tuple[Any, ...]], None]
Weigh = Callable[[Any], int]


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
    * A record's timeout does not count the time the run was held back waiting for a
      rate limit's permits (:mod:`.hold`): the function's calls run with the run's
      :class:`~.hold.Hold` as the current one, which a limiter marks while it waits.
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
        gate: Gate | None = None,
        batch_size: int = 1,
        batch_wait: float = 0.0,
    ) -> None:
        self._func = func
        self.weigh = weigh
        self.retry = retry
        self.can_release = mode is OutputMode.UNORDERED
        self.queue = OrderedQueue() if mode is OutputMode.ORDERED else UnorderedQueue()
        self._default_timeout_hook = has_default_timeout(func)
        self._handles_errors = not has_default_error_handler(func)
        self._timeout = timeout
        self._clock = clock
        self._loop = loop
        self._loop_thread: int | None = None
        self._post = post
        # The run's hold: its records' deadlines move on while a rate limit holds it.
        self.hold = Hold(clock)
        self._timers = Timers(clock, timeout, self._expire, self._restart, self.hold)
        self._invoker = invoker_for(func, self, loop)
        # With a gate or batched calls, records wait for their call to start
        # (mailbox/starter.py); otherwise they start as they are admitted.
        self._starter: Starter | None = None
        if gate is not None or batch_size > 1:
            self._starter = Starter(
                gate=gate,
                batch_size=batch_size,
                batch_wait=batch_wait,
                clock=clock,
                timers=self._timers,
                start=self._start_calls,
                is_live=self._is_live,
            )
        self.output = Output()
        self._flush_scheduled = False
        self._input_done = False
        self._closing = False
        self.failed: BaseException | None = None
        # Statistics (written on the loop thread only).
        self.in_flight = 0
        self.peak = 0
        self.completed = 0
        self._timeouts = 0
        self._retries = 0
        self._errors = 0

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        self._loop_thread = threading.get_ident()
        token = set_hold(self.hold)  # what the function makes in open() holds it too
        try:
            await maybe_await(self._func.open())
        finally:
            reset_hold(token)

    def finish(self) -> None:
        """No more input: post "done" once every admitted record has been emitted."""
        self._input_done = True
        if self._starter is not None:
            self._starter.flush()
        self._maybe_finish()

    def cancel(self) -> None:
        """The consumer went away: drop everything in flight and close quietly."""
        if not self._closing:
            self._shut_down(None)

    def statistics(self) -> OperatorStatistics:
        return OperatorStatistics(
            in_flight=self.in_flight,
            peak_in_flight=self.peak,
            completed=self.completed,
            timeouts=self._timeouts,
            retries=self._retries,
            errors=self._errors,
        )

    def has_timers(self) -> bool:
        """Whether any deadline, retry or batch-wait timer is still scheduled."""
        starter = self._starter
        return self._timers.has_timers() or (starter is not None and starter.has_timers())

    # -- admission -----------------------------------------------------------------------

    def admit(self, values: list[Any]) -> None:
        """Admit a chunk of inputs (records and watermarks) and start their calls."""
        if self.failed is not None or self._closing:
            return
        # Completions during admission are flushed once at the end, not scheduled each.
        self._flush_scheduled = True
        if self._starter is not None:
            self._starter.add([e for e in map(self._put_waiting, values) if e is not None])
            self._flush()
            return
        group = self._timers.new_group()
        token = set_hold(self.hold)  # the calls' tasks inherit it
        try:
            self._invoker.admit(values, group)
        finally:
            reset_hold(token)
        if self.failed is None:
            self._timers.arm(group)
        self._flush()

    def put(self, value: Any, group: Group) -> Entry | None:
        """Queue one input; returns its entry if it is a record (watermarks pass)."""
        entry = Entry(value, self.weigh(value) if self.weigh is not None else 1)
        if isinstance(value, Watermark):
            entry.weight = 1
            entry.outputs = [value]
            self.queue.put_watermark(entry, self.output.ready)
            return None
        entry.group = group
        group.entries.append(entry)
        group.pending += 1
        self.queue.put(entry)
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight
        return entry

    def _put_waiting(self, value: Any) -> Entry | None:
        """Queue one input whose call the starter starts (its group comes with it)."""
        if isinstance(value, Watermark):
            return self.put(value, self._timers.new_group())
        entry = Entry(value, self.weigh(value) if self.weigh is not None else 1)
        self.queue.put(entry)
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight
        return entry

    def _is_live(self, entry: Entry) -> bool:
        """Whether ``entry`` still needs a call (it did not complete or time out)."""
        return not (entry.done or entry.attempt == TIMED_OUT or self.failed or self._closing)

    def left_at_once(self, value: Any, outputs: list[Any]) -> None:
        """A record finished in its first step with nothing ahead of it: its outputs
        leave without an entry, a queue slot or completion bookkeeping."""
        output = self.output
        if self.weigh is None and not output.ready:
            output.out.extend(outputs)
            output.out_units += 1
        else:
            output.ready.append(Partial(outputs, self.weigh(value) if self.weigh else 1))
        self.completed += 1
        if self.in_flight >= self.peak:
            self.peak = self.in_flight + 1

    # -- completion ----------------------------------------------------------------------

    def complete_from_any_thread(
        self, entry: Entry, attempt: int, outputs: Iterable[Any] | None, error: BaseException | None
    ) -> None:
        if threading.get_ident() == self._loop_thread:
            self.complete(entry, attempt, outputs, error)
        else:
            self._loop.call_soon_threadsafe(self.complete, entry, attempt, outputs, error)

    def release(self, entry: Entry, attempt: int, outputs: Iterable[Any], units: int) -> None:
        """Part of a record's outputs leave now, freeing ``units`` of its capacity."""
        if not self.can_release:
            raise RuntimeError("outputs may be released early only in UNORDERED mode")
        if entry.done or entry.attempt != attempt or self.failed is not None or self._closing:
            return  # the record moved on: its final completion carries its outputs
        units = max(0, min(int(units), entry.weight))
        entry.weight -= units
        self.queue.released(entry, Partial(list(outputs), units), self.output.ready)
        self._schedule_flush()

    def on_task_done(self, entry: Entry, attempt: int, task: asyncio.Task[Any]) -> None:
        if self._closing:
            return  # cancelled by the shutdown: not the record's own outcome
        if task.cancelled():
            if entry.attempt == attempt and not entry.done:
                # Cancelled by something other than us (we only cancel records that
                # already moved on): that is the call's outcome.
                self.complete(entry, attempt, None, asyncio.CancelledError())
            return
        error = task.exception()
        if error is None:
            self.complete(entry, attempt, task.result(), None)
        else:
            self.complete(entry, attempt, None, error)

    def complete(
        self, entry: Entry, attempt: int, outputs: Iterable[Any] | None, error: BaseException | None
    ) -> None:
        """The outcome of call ``attempt`` of ``entry``; ignored unless it is the first."""
        if entry.done or entry.attempt != attempt or self.failed is not None or self._closing:
            return  # a late or duplicate completion (the first one won), or a shutdown
        entry.task = None
        if self._starter is not None:
            self._starter.attempt_ended(entry, error)
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
        retry = self.retry
        if retry is not None and attempt != TIMED_OUT and attempt < retry.max_attempts:
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
        self.completed += 1
        group = entry.group
        group.pending -= 1
        if group.pending == 0:
            self._timers.settled(group)
        self.queue.completed(entry, self.output.ready)
        self._schedule_flush()

    # -- retries and timeouts ---------------------------------------------------------

    def _schedule_retry(self, entry: Entry, attempt: int, error: BaseException | None) -> bool:
        """Schedule the next attempt, unless the strategy says it starts too late."""
        retry = self.retry
        assert retry is not None
        when = retry.retry_at(attempt, self._clock.now(), error)
        if not retry.starts_in_time(when, self._timers.deadline(entry.group)):
            return False
        entry.attempt = attempt + 1
        self._retries += 1
        self._timers.wait_retry(entry, when)
        return True

    def _restart(self, entries: list[Entry]) -> None:
        live = [e for e in entries if not e.done and e.attempt != TIMED_OUT]
        if live and self.failed is None:
            if self._starter is not None:
                self._starter.add(live)  # a retry is a call: it passes the gate again
            else:
                self._start_calls(live)

    def _start_calls(self, entries: list[Entry]) -> None:
        # The calls' tasks inherit the run's hold (not the starter's wait at its gate:
        # records waiting there have no deadline yet, and the calls already started
        # keep theirs running).
        token = set_hold(self.hold)
        try:
            self._invoker.start(entries)
        finally:
            reset_hold(token)

    def _expire(self, group: Group) -> None:
        for entry in group.entries:
            if not entry.done and entry.attempt != TIMED_OUT:
                self._time_out(entry)
                if self.failed is not None:
                    return

    def _time_out(self, entry: Entry) -> None:
        # A retry is never scheduled past the deadline, so a record timing out has a
        # call running (or none, if its function never answers): cancel it.
        self._timeouts += 1
        attempts = entry.attempt
        if entry.task is not None:
            entry.task.cancel()
            entry.task = None
        entry.attempt = TIMED_OUT
        timeout = self._timeout if self._timeout is not None else float("nan")
        if self._starter is not None:
            self._starter.attempt_ended(entry, LookupTimeout(entry.value, timeout, attempts))
        result = ResultFuture(self, entry, TIMED_OUT)
        if self._default_timeout_hook:
            result.complete_exceptionally(LookupTimeout(entry.value, timeout, attempts))
            return
        try:
            self._func.timeout(entry.value, result)
        except Exception as exc:
            self._fail(exc)

    # -- output and shutdown --------------------------------------------------------------

    def _schedule_flush(self) -> None:
        if self.output.ready and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self.output.is_empty() and self.failed is None:
            outputs, freed, records = self.output.take()
            self.in_flight -= records
            self._post(("emit", outputs, freed))
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        idle = len(self.queue) == 0 and self.output.is_empty()
        if idle and self._input_done and not self._closing and self.failed is None:
            self._shut_down(None)

    def _fail(self, error: BaseException) -> None:
        if self.failed is None and not self._closing:
            self._flush()  # what completed before the error still goes out, in order
            self.failed = error
            self._shut_down(error)

    def _shut_down(self, error: BaseException | None) -> None:
        """Cancel what is in flight, close the function, then post the final message.

        Runs once per run: every path to it checks ``_closing`` first."""
        self._closing = True
        if self._starter is not None:
            self._starter.cancel()
        for group in self._timers.cancel_all():
            for entry in group.entries:
                if entry.task is not None:
                    entry.task.cancel()
                    entry.task = None
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
