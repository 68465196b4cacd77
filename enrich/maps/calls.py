"""A user's async function behind the operator: its calls, their errors, their metrics.

The operator's records are ``(position, row)`` pairs: ``position`` says where the row's
outputs go, ``row`` is the dict the user's function receives. Every record completes with
exactly one output, ``(position, result)``: the function's own result (a dict, a list of
dicts, None), or :class:`~enrich.lookup.outcome.Failed` with the error the ``on_error``
policy kept. So the caller counts each row once, whatever it became; turning results
into columns is :mod:`.results`'s job.

Three shapes, chosen once per run:

* :class:`RowCall`: ``async def fn(row)``, or an AsyncFunction's ``invoke(row)``: a
  coroutine per row, started eagerly by the operator;
* :class:`CallbackRowCall`: an AsyncFunction's ``async_invoke(row, result)`` (Flink's
  callback style): ``result`` may be completed later, from any thread;
* :class:`BatchCall`: ``async def fn(rows)`` (or ``invoke(rows)``): one call per batch
  the operator's starter formed, one result per row, in order.

A user's AsyncFunction is opened once per process (:mod:`.process`), on the loop, before
the first record; its ``timeout(row, result)`` hook may complete a row that ran out of
time (a fallback) and its ``handle_error(row, error)`` may turn an error into results.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from ..engine.clock import Clock
from ..engine.function import (
    AsyncFunction,
    ResultFuture,
    as_async_function,
    has_default_error_handler,
    has_default_timeout,
    invoke_style,
)
from ..engine.records.call_metrics import JoinMetrics
from ..engine.records.failure import Failed, error_kind
from ..engine.records.log_limit import LogLimit
from ..engine.retry import RetryStrategy
from .process import opened, released

log = logging.getLogger("enrich.mapping")  # the logger's name users configure

# Failed rows are logged a few per map and minute in each process; the metrics count all.
FAILED_ROWS = LogLimit()


class MapCall(AsyncFunction):
    """The base of the three shapes: opening, error policy, timeout hook, metrics.

    Args:
        fn: the user's async function or :class:`~enrich.AsyncFunction`.
        key: the map's identity in the process (its user function is opened once).
        name: the map's name, for log lines.
        policy: ``on_error`` ("fail", "null", "drop", "error_column").
        metrics: where calls, latencies and errors are counted (loop thread only).
        clock: times the calls.
    """

    def __init__(
        self,
        fn: Any,
        *,
        key: Hashable,
        name: str,
        policy: str,
        metrics: JoinMetrics,
        clock: Clock,
    ) -> None:
        self._user: Any = fn
        self._key = key
        self._name = name
        self._policy = policy
        self.metrics = metrics
        self._clock = clock
        self._custom_timeout = isinstance(fn, AsyncFunction) and not has_default_timeout(fn)
        self._custom_errors = isinstance(fn, AsyncFunction) and not has_default_error_handler(fn)
        self.loop: asyncio.AbstractEventLoop | None = None  # set by open(), on the loop
        self.loop_thread: int | None = None
        self._opened = False  # the user's function was opened for this run

    async def open(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        if isinstance(self._user, AsyncFunction):
            self._user = await opened(self._key, self._user)
            self._opened = True

    async def close(self) -> None:
        # The run is over (exhausted or failed): the user's function is closed after
        # each task (enrich.maps.process says why not at the worker's end).
        if self._opened:
            self._opened = False
            await released(self._key)

    def handle_error(self, value: Any, error: BaseException) -> Iterable[Any]:
        position, row = value
        if self._custom_errors:
            try:
                return [(position, list(self._user.handle_error(row, error)))]
            except BaseException as raised:
                error = raised
        kind = error_kind(error)
        self.metrics.errors[kind] += 1
        if kind == "timeout":
            self.metrics.timeouts += 1
        if self._policy == "fail":
            raise error
        held = FAILED_ROWS.admit(self._name)
        if held is not None:
            log.warning(
                "%s: a call failed (%s): %s%s",
                self._name,
                kind,
                error,
                f" ({held} more failed rows not logged)" if held else "",
            )
        return [(position, Failed(error))]

    def timeout(self, value: Any, result: ResultFuture) -> None:
        if not self._custom_timeout:
            super().timeout(value, result)
            return
        position, row = value
        self._user.timeout(row, _Relay(result, position, None))

    def _took(self, started: float, calls: int = 1, rows: int = 1) -> None:
        metrics = self.metrics
        metrics.requests += calls
        metrics.keys_requested += rows
        metrics.latency.record(self._clock.now() - started)


class RowCall(MapCall):
    """``await fn(row)`` per record (an AsyncFunction's ``invoke``: a list of dicts)."""

    def __init__(self, fn: Any, **kwargs: Any) -> None:
        super().__init__(fn, **kwargs)
        self._call: Callable[[Any], Any] = fn.invoke if isinstance(fn, AsyncFunction) else fn

    async def open(self) -> None:
        await super().open()
        if isinstance(self._user, AsyncFunction):
            self._call = self._user.invoke

    async def invoke(self, value: Any) -> list[Any]:
        position, row = value
        started = self._clock.now()
        try:
            return [(position, await self._call(row))]
        finally:
            self._took(started)


class CallbackRowCall(MapCall):
    """``fn.async_invoke(row, result)`` per record; ``result`` completes it later."""

    def async_invoke(self, value: Any, result: ResultFuture) -> None:
        position, row = value
        self._user.async_invoke(row, _Relay(result, position, self))


class BatchCall(MapCall):
    """``await fn(rows)`` per batch of records; the result's i-th item is row i's."""

    def __init__(self, fn: Any, **kwargs: Any) -> None:
        super().__init__(fn, **kwargs)
        self._calls: set[asyncio.Task[None]] = set()

    def async_invoke_many(self, values: Sequence[Any], results: Sequence[ResultFuture]) -> None:
        task = asyncio.get_running_loop().create_task(self._batch(values, results))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def close(self) -> None:
        # The run is over: a batch still out answers nobody.
        for task in list(self._calls):
            task.cancel()
        await super().close()

    async def _batch(self, values: Sequence[Any], results: Sequence[ResultFuture]) -> None:
        user = self._user
        rows = [row for _, row in values]
        started = self._clock.now()
        try:
            if isinstance(user, AsyncFunction) and invoke_style(user) == "callback":
                answer = await _callback_batch(user, rows)
            else:
                answer = await (
                    user.invoke(rows) if isinstance(user, AsyncFunction) else user(rows)
                )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            for result in results:
                result.complete_exceptionally(exc)
            return
        finally:
            self._took(started, rows=len(rows))
        if not isinstance(answer, (list, tuple)) or len(answer) != len(rows):
            error = BatchShapeError(len(rows), answer)
            for result in results:
                result.complete_exceptionally(error)
            return
        for (position, _), result, one in zip(values, results, answer, strict=True):
            result.complete([(position, one)])


class BatchShapeError(TypeError):
    """A batch function's answer is not one result per row (never retried)."""

    retryable = False

    def __init__(self, rows: int, answer: Any) -> None:
        got = (
            f"{len(answer)} results"
            if isinstance(answer, (list, tuple))
            else f"{type(answer).__name__} {answer!r:.80}"
        )
        super().__init__(
            f"a batch function must return a list of one result per row: {rows} rows, got {got}"
        )
        self.kind = "batch"


async def _callback_batch(user: AsyncFunction, rows: list[Any]) -> Any:
    """A callback-style AsyncFunction's ``async_invoke(rows, result)``, awaited."""
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    user.async_invoke(rows, _FutureResult(done))
    return await done


class _FutureResult(ResultFuture):
    """A ResultFuture that resolves an asyncio future (from any thread)."""

    __slots__ = ("_done",)

    def __init__(self, done: asyncio.Future[Any]) -> None:
        self._done = done

    def complete(self, outputs: Iterable[Any]) -> None:
        self._resolve(list(outputs), None)

    def complete_exceptionally(self, error: BaseException) -> None:
        self._resolve(None, error)

    def _resolve(self, value: Any, error: BaseException | None) -> None:
        loop = self._done.get_loop()

        def resolve() -> None:
            if self._done.done():
                return  # the first completion counts
            if error is None:
                self._done.set_result(value)
            else:
                self._done.set_exception(error)

        loop.call_soon_threadsafe(resolve)


class _Relay(ResultFuture):
    """The result handed to a user's callback or timeout hook: its outputs (Flink's
    collection of dicts) become the record's one output ``(position, outputs)``."""

    __slots__ = ("_call", "_position", "_result", "_started")

    def __init__(self, result: ResultFuture, position: Any, call: MapCall | None) -> None:
        self._result = result
        self._position = position
        self._call = call
        self._started = call._clock.now() if call is not None else 0.0

    @property
    def attempt(self) -> int:
        return self._result.attempt

    def complete(self, outputs: Iterable[Any]) -> None:
        self._count()
        self._result.complete([(self._position, list(outputs))])

    def complete_exceptionally(self, error: BaseException) -> None:
        self._count()
        self._result.complete_exceptionally(error)

    def _count(self) -> None:
        call = self._call
        if call is None:
            return
        self._call = None  # a call is counted once, whatever completes it later
        if threading.get_ident() == call.loop_thread or call.loop is None:
            call._took(self._started)
        else:  # metrics are the loop's: count it there
            call.loop.call_soon_threadsafe(call._took, self._started)


def call_for(fn: Any, batched: bool, **kwargs: Any) -> MapCall:
    """The shape for ``fn`` (a plain async function or an AsyncFunction)."""
    if isinstance(fn, AsyncFunction):
        style = invoke_style(fn)
        if style == "many":
            raise TypeError(
                f"{type(fn).__name__}: async_map calls invoke() or async_invoke(); for "
                "calls of several rows, give batch_size= and take a list in invoke()"
            )
    else:
        fn = as_async_function(fn).invoke  # checks that it is an async function
    if batched:
        return BatchCall(fn, **kwargs)
    if isinstance(fn, AsyncFunction) and invoke_style(fn) == "callback":
        return CallbackRowCall(fn, **kwargs)
    return RowCall(fn, **kwargs)


def user_retry(retry: RetryStrategy | None) -> RetryStrategy | None:
    """``retry`` with its result predicate applied to what the user's function returned
    (a dict counts as one row, None as none), not to the operator's outputs."""
    if retry is None or retry.retry_on_result is None:
        return retry
    wanted = retry.retry_on_result

    def on_result(outputs: Sequence[Any]) -> bool:
        ((_, result),) = outputs
        if isinstance(result, Failed):
            return False
        rows = [] if result is None else [result] if isinstance(result, dict) else result
        return bool(wanted(rows))

    wrapped = copy.copy(retry)  # the strategies' own __init__ takes other arguments
    object.__setattr__(wrapped, "retry_on_result", on_result)
    return wrapped
