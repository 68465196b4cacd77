"""A user's :class:`~enrich.AsyncFunction` is opened once per operator run in a Python
worker process, and closed when the run ends.

Flink opens an async function once per parallel instance and closes it when the
instance ends. A Spark worker process runs task after task, but it gives no hook at its
own end: Spark ends a forked worker with ``os._exit`` (no ``atexit``, no ``finally``), and
kills one whose task stopped reading its output. So the closest thing Spark ends
cleanly is a task's run: the function is opened (``open()``, on the runtime loop, where
an aiohttp session or a client must be made) when a partition's run starts and closed
(``close()``, on the same loop) when it ends, exhausted or stopped by a failure, so a
user's session is closed and a buffered writer flushed after each task. Runs of the
same map that overlap in one process (two calls of one SQL function in a query) share
the first one's opening, told apart by the map's identity, and the last to end closes
it. A run whose worker Spark kills before it ends (``limit()`` stops reading, a task
killed) is not closed: its sockets close with the process. ``close_all`` at interpreter
exit remains for processes that do exit normally (a driver's local run).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
from collections.abc import Hashable

from ..engine.function import AsyncFunction
from ..engine.runtime import in_loop_thread, maybe_await

log = logging.getLogger("enrich.mapping")  # the logger's name users configure

# The process's opened functions: map identity -> (function, its opening); the opening
# is a future of the loop the function was opened on, where it is closed too.
_opened: dict[Hashable, tuple[AsyncFunction, asyncio.Future[None]]] = {}
_users: dict[Hashable, int] = {}  # the runs using each opened function
_pid = 0
_CLOSE_TIMEOUT = 10.0


async def opened(key: Hashable, function: AsyncFunction) -> AsyncFunction:
    """The process's function for the map ``key``: ``function`` itself, opened, if it is
    the first the process sees, else the one opened before. Run on the runtime loop.

    Raises:
        BaseException: what ``open()`` raised (a later task tries again).
    """
    global _pid
    if _pid != os.getpid():
        _opened.clear()
        _users.clear()
        _pid = os.getpid()
        atexit.register(_close_all, _pid)
    known = _opened.get(key)
    if known is None:
        opening = asyncio.get_running_loop().create_future()
        known = _opened[key] = (function, opening)
        try:
            await maybe_await(function.open())
        except BaseException as exc:
            del _opened[key]
            opening.set_exception(exc)
            opening.exception()  # retrieved: the caller raises it
            raise
        opening.set_result(None)
        _users[key] = _users.get(key, 0) + 1
        return function
    await asyncio.shield(known[1])  # a task that came while the first was opening it
    _users[key] = _users.get(key, 0) + 1
    return known[0]


async def released(key: Hashable) -> None:
    """A run of the map ``key`` ended: the last run using its function closes it (on the
    runtime loop). A ``close()`` that raises is logged, never the run's failure: the
    run's rows are out by then."""
    left = _users.get(key, 0) - 1
    if left > 0:
        _users[key] = left
        return
    _users.pop(key, None)
    known = _opened.pop(key, None)
    if known is None:
        return
    try:
        await maybe_await(known[0].close())
    except Exception:
        log.warning("close() of %r failed", known[0], exc_info=True)


def _close_all(pid: int) -> None:
    """At exit: close every opened function on the loop it was opened on (the runtime
    loop, still running in its daemon thread), newest first."""
    if pid != os.getpid() or not _opened:
        return
    by_loop: dict[asyncio.AbstractEventLoop, list[AsyncFunction]] = {}
    for function, opening in reversed(_opened.values()):
        by_loop.setdefault(opening.get_loop(), []).append(function)
    _opened.clear()
    for loop, functions in by_loop.items():
        if loop.is_running() and not in_loop_thread(loop):
            try:
                asyncio.run_coroutine_threadsafe(_close(functions), loop).result(_CLOSE_TIMEOUT)
            except Exception:  # pragma: no cover - a close() that hangs past the timeout
                log.warning("closing the async functions at exit did not finish", exc_info=True)


async def _close(functions: list[AsyncFunction]) -> None:
    for function in functions:
        try:
            await maybe_await(function.close())
        except Exception:
            log.warning("close() of %r failed at exit", function, exc_info=True)
