"""A user's :class:`~enrich.AsyncFunction` lives once per Python worker process.

Flink opens an async function once per parallel instance and keeps it for the job's
life; a Spark worker process is the closest thing (it runs task after task, micro-batch
after micro-batch). Each task unpickles its own copy of the function, so the copies are
told apart by the map's identity: the first copy a process sees is opened (``open()``,
on the runtime loop, where an aiohttp session or a client must be made) and serves every
later task of that map in the process; the others are never opened. ``close()`` runs
once, on the runtime loop, when the process exits normally (a killed worker's sockets
close with it).
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
        return function
    await asyncio.shield(known[1])  # a task that came while the first was opening it
    return known[0]


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
