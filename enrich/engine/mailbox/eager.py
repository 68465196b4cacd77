"""Eager starts: run a coroutine's first step at once, inside a task of its own.

An instantly-completing coroutine then costs no trip through the event loop, which is
what makes per-record coroutines affordable. During every step
``asyncio.current_task()`` is the record's own task, so ``asyncio.timeout``, aiohttp and
redis.asyncio work inside ``invoke``; a coroutine that suspends goes on as an ordinary
task.

Python 3.12 has this built in (``Task(..., eager_start=True)``). On 3.10 and 3.11 the
runner drives the first step of asyncio's pure-Python task itself, and reuses the task
object of a coroutine that finished in that step without anything holding on to it.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine
from typing import Any

# The adaptive runner's sample (3.10, 3.11): starts watched before choosing, and the
# share of instant completions (one in INSTANT) below which C tasks pay more.
SAMPLE = 256
INSTANT = 4

# (the task to wait for, or None when the coroutine already finished; result; error)
Started = tuple["asyncio.Task[Any] | None", Any, "BaseException | None"]


class _Runner312:
    __slots__ = ("_loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def start(self, coro: Coroutine[Any, Any, Any]) -> Started:
        task = asyncio.Task(coro, loop=self._loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
        if not task.done():
            return task, None, None
        if task.cancelled():
            return None, None, asyncio.CancelledError()
        error = task.exception()
        return None, (None if error is not None else task.result()), error


if sys.version_info < (3, 12):  # pragma: no branch
    # asyncio's private internals, typed loosely: this branch is pinned to 3.10/3.11.
    from asyncio import futures as _futures, tasks as _tasks

    futures: Any = _futures
    tasks: Any = _tasks

    # The C module's own dict (3.10, 3.11), read by asyncio.current_task(). The runner
    # writes it directly instead of calling _enter_task/_leave_task: two C calls per
    # record were a fifth of the eager step (`./scripts/dev bench operator`).
    _current_tasks = tasks._current_tasks
    _copy_context = contextvars.copy_context

    class _RecordTask(tasks._PyTask):  # type: ignore[misc]  # a private, untyped base
        """asyncio's Python task, created without scheduling its first step."""

        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            futures._PyFuture.__init__(self, loop=loop)
            self._name = "enrich-record"
            self._num_cancels_requested = 0
            self._must_cancel = False
            self._fut_waiter = None
            self._coro: Coroutine[Any, Any, Any] | None = None
            self._context: contextvars.Context | None = None
            self._log_destroy_pending = False  # a spare task is not a pending one

    class _Runner311:
        __slots__ = ("_loop", "_spare")

        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            self._loop = loop
            self._spare: _RecordTask | None = None

        def start(self, coro: Coroutine[Any, Any, Any]) -> Started:
            loop = self._loop
            task = self._spare
            if task is None:
                task = _RecordTask(loop)
            else:
                self._spare = None
            context = task._context = _copy_context()
            task._coro = coro
            # Started from inside another task (a timer run by a test's FakeClock, the
            # async twin): step aside for the record's task, as 3.12's eager tasks do.
            current = _current_tasks
            outer = current.get(loop)
            current[loop] = task
            try:
                yielded = context.run(coro.send, None)
            except StopIteration as stop:
                result, error = stop.value, None
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                result, error = None, exc
            else:
                self._go_on(task, yielded)
                return task, None, None
            finally:
                if outer is None:
                    del current[loop]
                else:
                    current[loop] = outer
            if task._callbacks or task._must_cancel or task._num_cancels_requested:
                # Something holds on to this task: finish it like asyncio would.
                if error is None:
                    futures._PyFuture.set_result(task, result)
                else:
                    futures._PyFuture.set_exception(task, error)
                    task._log_traceback = False
            else:
                self._spare = task  # reused; its _coro and _context are replaced then
            return None, result, error

        def _go_on(self, task: _RecordTask, yielded: Any) -> None:
            """What ``Task.__step`` does after a step that yielded, then hand over."""
            task._log_destroy_pending = True
            tasks._register_task(task)
            step = task._Task__step
            context = task._context
            blocking = getattr(yielded, "_asyncio_future_blocking", None)
            if blocking and futures._get_loop(yielded) is self._loop:
                yielded._asyncio_future_blocking = False
                yielded.add_done_callback(task._Task__wakeup, context=context)
                task._fut_waiter = yielded
                if task._must_cancel and yielded.cancel(msg=task._cancel_message):
                    task._must_cancel = False
            elif yielded is None:  # a bare yield: give the loop one iteration
                self._loop.call_soon(step, context=context)
            else:
                error = RuntimeError(f"task {task!r} got bad yield: {yielded!r}")
                self._loop.call_soon(step, error, context=context)

    class _AdaptiveRunner311:
        """Eager starts while they pay, asyncio's C tasks once they do not.

        A record that suspends goes on as asyncio's *pure-Python* task here (the C task
        cannot be created without scheduling its first step), and each of its later steps
        and wake-ups runs as Python code: an HTTP call through aiohttp suspends several
        times, and those steps cost more than the eager start saves. So the runner
        watches its first :data:`SAMPLE` starts: when fewer than one in :data:`INSTANT`
        finished in its first step (calls that wait on the network), every later record
        starts as a C task (``loop.create_task``: the first step one loop iteration
        later, every step in C); otherwise it stays eager (cache hits, instant answers).
        Either way a record's task, context, cancellation and completion are asyncio's.
        """

        __slots__ = ("_eager", "_instant", "_loop", "_starts", "start")

        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            self._loop = loop
            self._eager = _Runner311(loop)
            self._starts = 0
            self._instant = 0
            self.start = self._sample

        def _sample(self, coro: Coroutine[Any, Any, Any]) -> Started:
            started = self._eager.start(coro)
            self._starts += 1
            if started[0] is None:
                self._instant += 1
            if self._starts >= SAMPLE:
                lazy = self._instant * INSTANT < self._starts
                self.start = self._lazy if lazy else self._eager.start
            return started

        def _lazy(self, coro: Coroutine[Any, Any, Any]) -> Started:
            return self._loop.create_task(coro), None, None

    EagerRunner: Any = _AdaptiveRunner311
else:  # pragma: no cover - exercised on the interpreters that have it
    EagerRunner = _Runner312
