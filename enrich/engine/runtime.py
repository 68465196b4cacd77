"""The per-process runtime: one asyncio loop in a daemon thread, shared by every operator.

The loop is the "mailbox" of the engine: every state change of an operator (queues,
timers, caches, statistics) happens on it, so the engine needs no locks. It is created
lazily, keyed by ``os.getpid()``, and rebuilt in a forked child (Spark forks Python
workers from a daemon, and kills idle ones).

Process-local resources (connection pools, HTTP sessions, caches) live in a registry
keyed by the same pid, so they are shared by all tasks of a process and rebuilt
transparently in a new one.

While a run calls, the cyclic garbage collector's youngest generation is collected less
often (:func:`fewer_collections`): a call through an HTTP client allocates tens of
container objects that live as long as the call, and at CPython's default threshold a
collection examines and promotes them many times over.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_runtime: _Runtime | None = None
_resources: dict[Hashable, Any] = {}
_resources_pid = os.getpid()


def _new_loop() -> asyncio.AbstractEventLoop:
    if os.environ.get("ENRICH_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class _Runtime:
    """A loop running forever in a daemon thread of the process that created it."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = _new_loop()
        started = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(started,), name="enrich-loop", daemon=True
        )
        self.thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)


def get_loop() -> asyncio.AbstractEventLoop:
    """The process's runtime loop, started on first use (and again after a fork)."""
    global _runtime
    runtime = _runtime
    if runtime is not None and runtime.pid == os.getpid():
        return runtime.loop
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid():
            _runtime = _Runtime()
        return _runtime.loop


def in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the caller runs on ``loop``'s own thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def run_sync(factory: Callable[[], Coroutine[Any, Any, T]], timeout: float | None = None) -> T:
    """Run a coroutine on the runtime loop and wait for it from a non-loop thread."""
    loop = get_loop()
    if in_loop_thread(loop):
        raise RuntimeError("run_sync() would deadlock: called on the runtime loop's own thread")
    future: Future[T] = asyncio.run_coroutine_threadsafe(factory(), loop)
    return future.result(timeout)


def process_local(key: Hashable, factory: Callable[[], T]) -> T:
    """The process-wide resource for ``key``, made by ``factory()`` on first use.

    Call it from the runtime loop (where pools and sessions must be created). A forked
    child starts with an empty registry: its parent's sockets are not its own.
    """
    global _resources_pid
    pid = os.getpid()
    if pid != _resources_pid:
        _resources.clear()
        _resources_pid = pid
    try:
        return _resources[key]  # type: ignore[no-any-return]
    except KeyError:
        resource = _resources[key] = factory()
        return resource


def pop_process_local(key: Hashable) -> Any:
    """Remove and return the resource for ``key`` (None when there is none)."""
    return _resources.pop(key, None) if os.getpid() == _resources_pid else None


async def maybe_await(value: Awaitable[T] | T) -> T:
    """Await ``value`` when it is awaitable (hooks may be sync or async)."""
    if isinstance(value, Awaitable):
        return await value
    return value


# The youngest generation's threshold while a run calls (CPython's default: 700
# allocations). With 100 aiohttp calls in flight, ~50 container objects a call, a Spark
# worker spent ~38 us of its ~270 us a row collecting at 700; without Spark the client's
# CPU a row fell from 220 us to 175 at 5,000 and 157 at 10,000, and no further at
# 20,000 or 50,000 (issue 43, docs/async-map.md).
YOUNG_THRESHOLD = 10_000

_collections_lock = threading.Lock()
_collecting_runs = 0  # the runs inside fewer_collections() now
# The thresholds before the first run and those it set, while raised.
_raised: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None


@contextmanager
def fewer_collections(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Within: the collector's youngest generation collects every ``young`` allocations
    at least (its other thresholds as they were).

    Guarantees: the process's thresholds are raised by the first run to enter and
    restored when the last one leaves, unless something else changed them meanwhile
    (then its setting stays); a threshold already higher, or a collector disabled with
    a threshold of 0, is left alone. Cyclic garbage is still collected, in larger rounds.
    """
    global _collecting_runs, _raised
    with _collections_lock:
        _collecting_runs += 1
        if _collecting_runs == 1:
            before = gc.get_threshold()
            if 0 < before[0] < young:
                _raised = before, (young, before[1], before[2])
                gc.set_threshold(*_raised[1])
    try:
        yield
    finally:
        with _collections_lock:
            _collecting_runs -= 1
            raised = _raised
            if _collecting_runs == 0 and raised is not None:
                _raised = None
                if gc.get_threshold() == raised[1]:
                    gc.set_threshold(*raised[0])


def _reset_after_fork() -> None:
    global _runtime, _lock, _collections_lock, _collecting_runs, _raised
    _runtime = None
    _lock = threading.Lock()
    _resources.clear()
    # A child forked during a run runs none of its parent's: its thresholds go back.
    _collections_lock = threading.Lock()
    if _raised is not None and gc.get_threshold() == _raised[1]:
        gc.set_threshold(*_raised[0])
    _collecting_runs = 0
    _raised = None


os.register_at_fork(after_in_child=_reset_after_fork)


@atexit.register
def _shutdown() -> None:
    runtime = _runtime
    if runtime is not None and runtime.pid == os.getpid():
        runtime.stop()
