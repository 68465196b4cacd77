"""What the operator calls: ``AsyncFunction`` and the ``ResultFuture`` it completes."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from .._errors import LookupTimeout


class ResultFuture:
    """The handle through which one attempt of one record is completed.

    Complete it once, from any thread, with :meth:`complete` or
    :meth:`complete_exceptionally`. Only the first completion of a record counts: a
    completion after the record already completed, timed out or moved on to a retry is
    ignored.
    """

    __slots__ = ("_attempt", "_entry", "_operator")

    def __init__(self, operator: Any, entry: Any, attempt: int) -> None:
        self._operator = operator
        self._entry = entry
        self._attempt = attempt

    @property
    def attempt(self) -> int:
        """Which call of the record this is: 1 for the first, 2 for the first retry, ...;
        0 for the completion a timeout hook makes."""
        return self._attempt

    def complete(self, outputs: Iterable[Any]) -> None:
        """Complete with the record's outputs (any iterable; empty means no output)."""
        self._operator.complete_from_any_thread(self._entry, self._attempt, outputs, None)

    @property
    def can_release(self) -> bool:
        """Whether :meth:`release` is available: the operator runs UNORDERED."""
        return bool(self._operator.can_release)

    def release(self, outputs: Iterable[Any], units: int) -> None:
        """Hand over part of the record's outputs before it completes (UNORDERED only).

        They leave as soon as no watermark is ahead of the record, and ``units`` of the
        capacity the record holds are returned at once (the rest when it completes).
        Call it on the loop thread, before the record's completion; a release after the
        record completed, timed out or moved on to a retry is ignored.

        Raises:
            RuntimeError: the operator runs ORDERED (see :attr:`can_release`).
        """
        self._operator.release(self._entry, self._attempt, outputs, units)

    def complete_exceptionally(self, error: BaseException) -> None:
        """Complete with an error: retried per the retry policy, else raised downstream."""
        if not isinstance(error, BaseException):
            raise TypeError(f"complete_exceptionally() needs an exception, got {error!r}")
        self._operator.complete_from_any_thread(self._entry, self._attempt, None, error)


class AsyncFunction:
    """A function applied asynchronously to each record; subclass it.

    Implement one of:

    * ``async def invoke(self, value) -> Iterable``: coroutine style. The coroutine runs on
      the runtime loop inside its own task; its first step runs eagerly, so a result that
      is ready at once never waits for the loop.
    * ``def async_invoke(self, value, result: ResultFuture) -> None``: callback style
      (Flink's ``asyncInvoke``). Start the work and return; complete ``result`` later,
      from any thread.

    Optionally override :meth:`timeout` (called on the loop when a record runs out of
    time), and :meth:`open` / :meth:`close` (sync or async, run once per operator run on
    the runtime loop).
    """

    def open(self) -> Awaitable[None] | None:
        """Called once before the first record, on the loop."""
        return None

    def close(self) -> Awaitable[None] | None:
        """Called once after the last record (or after a failure), on the loop."""
        return None

    async def invoke(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError(
            f"{type(self).__name__} must implement invoke() or async_invoke()"
        )

    def async_invoke(self, value: Any, result: ResultFuture) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement invoke() or async_invoke()"
        )

    def async_invoke_many(self, values: Sequence[Any], results: Sequence[ResultFuture]) -> None:
        """Start a chunk of records at once (for functions that batch their I/O).

        The operator calls this with the records admitted together; ``results[i]`` belongs
        to ``values[i]``. The default calls :meth:`async_invoke` for each.
        """
        for value, result in zip(values, results, strict=True):
            self.async_invoke(value, result)

    def handle_error(self, value: Any, error: BaseException) -> Iterable[Any]:
        """Called on the loop when a record ends in an error (retries used up, or a
        timeout that raised). Return outputs to emit instead, or raise to fail the run.

        The default re-raises: one bad record fails the run, as in Flink. Lookup joins
        override it with their ``on_error`` policy.
        """
        raise error

    def timeout(self, value: Any, result: ResultFuture) -> None:
        """Called when ``value`` ran out of its total timeout; by default fails with
        :class:`~enrich.LookupTimeout`. Complete ``result`` with a fallback to keep going."""
        result.complete_exceptionally(LookupTimeout(value, float("nan")))


class _CoroutineFunction(AsyncFunction):
    """A plain ``async def f(value) -> iterable`` seen as an AsyncFunction."""

    def __init__(self, fn: Callable[[Any], Awaitable[Iterable[Any]]]) -> None:
        self.invoke = fn  # type: ignore[method-assign,assignment]

    def __repr__(self) -> str:
        return f"AsyncFunction({getattr(self.invoke, '__qualname__', self.invoke)!r})"


def as_async_function(func: Any) -> AsyncFunction:
    """Accept an AsyncFunction, or a coroutine function used as its ``invoke``."""
    if isinstance(func, AsyncFunction):
        return func
    if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - async callable objects
    ):
        return _CoroutineFunction(func)
    raise TypeError(f"expected an enrich.AsyncFunction or an async function, got {func!r}")


def invoke_style(func: AsyncFunction) -> str:
    """How the operator drives ``func``: "many", "callback" or "coroutine"."""
    cls = type(func)
    if cls.async_invoke_many is not AsyncFunction.async_invoke_many:
        return "many"
    if cls.async_invoke is not AsyncFunction.async_invoke:
        return "callback"
    if isinstance(func, _CoroutineFunction) or cls.invoke is not AsyncFunction.invoke:
        return "coroutine"
    raise TypeError(f"{cls.__name__} must implement invoke() or async_invoke()")


def has_default_timeout(func: AsyncFunction) -> bool:
    return type(func).timeout is AsyncFunction.timeout


def has_default_error_handler(func: AsyncFunction) -> bool:
    return type(func).handle_error is AsyncFunction.handle_error
