"""Waiting for calls until a :class:`~enrich.engine.mailbox.hold.Deadline`, on an injected
clock: the one wait both lookup engines time their calls to the store with.

While the deadline's hold is held (the calls wait for a connection, a permit or a load),
only the calls' end or the hold's release is awaited: the deadline moves on meanwhile.
Otherwise the wait ends at the deadline as the clock tells it, so a ``FakeClock`` makes
it exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from ..clock import Clock
from .hold import Deadline, Hold, set_hold

T = TypeVar("T", bound="asyncio.Future[Any]")
R = TypeVar("R")


async def wait_within(calls: Iterable[T], deadline: Deadline | None, clock: Clock) -> set[T]:
    """Wait until every call is done or ``deadline`` falls (None: no deadline); the calls
    still out then (cancelling them is the caller's business)."""
    loop = asyncio.get_running_loop()
    pending: set[Any] = set(calls)
    while pending:
        if deadline is None:
            await asyncio.wait(pending)
            return set()
        wake: asyncio.Future[None] = loop.create_future()
        hold = deadline.hold
        if hold is not None and hold.is_held():
            waiter: Any = hold.when_released(partial(_resolve_once, wake))
        else:
            at = deadline.at()
            if clock.now() >= at:
                break
            waiter = clock.call_at(at, partial(_resolve_once, wake))
        try:
            _, pending = await asyncio.wait(pending | {wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            wake.cancel()
        pending.discard(wake)
    return pending


def _resolve_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(slots=True)
class Timed(Generic[R]):
    """A call run by :func:`call_within`: its task (done, or cancelled when ``late``),
    and the seconds it spent, less those its hold was held."""

    task: asyncio.Task[R]
    late: bool
    spent: float


async def call_within(
    call: Callable[[], Awaitable[R]], seconds: float, clock: Clock, parent: Hold | None = None
) -> Timed[R]:
    """Run ``call()`` with a hold of its own (marking ``parent`` too) and a deadline
    ``seconds`` from now that its waits move on (:class:`~.hold.held_back`); cancel it
    if it is still out then. The hold is set in the calling task's context, which the
    call's task inherits: call this from a task of the call's own."""
    hold = Hold(clock, parent)
    set_hold(hold)
    began = clock.now()
    task: asyncio.Task[R] = asyncio.ensure_future(call())
    try:
        late = bool(await wait_within([task], Deadline(began, seconds, hold), clock))
    except asyncio.CancelledError:  # the caller was closed: asyncio.wait leaves it be
        task.cancel()
        raise
    if late:
        task.cancel()
    return Timed(task, late, clock.now() - began - hold.held())
