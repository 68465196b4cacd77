"""Waiting for calls until a :class:`~enrich.engine.mailbox.hold.Deadline`, on an injected
clock: the one wait both lookup engines time their calls to the store with.

While the deadline's hold is held (the calls wait for a connection, a permit or a load),
only the calls' end or the hold's release is awaited: the deadline moves on meanwhile.
Otherwise the wait ends at the deadline as the clock tells it, so a ``FakeClock`` makes
it exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from typing import Any, TypeVar

from ..clock import Clock
from .hold import Deadline

T = TypeVar("T", bound="asyncio.Future[Any]")


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
