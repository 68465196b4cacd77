"""A source's live resources (sessions, clients), one per process and event loop.

Both connectors keep their connections this way. A resource is registered with
``enrich.process_local`` under ``(owner, settings, id(loop))``, so every copy of a source
with equal settings running on that loop shares it. In production that loop is the
process's single runtime loop, so there is one resource per process. The loop is part
of the key because asyncio connections are bound to the loop that opened them (an
aiohttp session must be created on the loop that uses it; pytest-asyncio gives each test
a loop of its own). A resource keeps a reference to its loop, so while it is registered
no other loop can be born with the same ``id``; a resource found registered for another
loop object anyway is replaced.

:class:`LoopLocal` is what a source holds: besides the registry it remembers the
resource it used last, so a source asking once per request skips hashing its settings.
That memory is trusted only while no resource has left the registry since (any pop, of
any source, starts a new generation), in the same process, on the same loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from ..engine.runtime import pop_process_local, process_local

__all__ = ("LoopBound", "LoopLocal", "loop_resource", "pop_loop_resource")


class LoopBound(Protocol):
    """A resource that knows the loop it was opened on."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...


R = TypeVar("R", bound=LoopBound)

# Counts the resources that left the registry; a remembered resource is reused only while
# this has not changed (pops are rare: a source's aclose(), a stale resource replaced).
_generation = 0


def loop_resource(
    owner: str, settings: Hashable, open: Callable[[asyncio.AbstractEventLoop], R]
) -> R:
    """This process's resource for ``(owner, settings)`` on the running loop, made by
    ``open(loop)`` on first use (the plain registry; :class:`LoopLocal` adds a memory)."""
    loop = asyncio.get_running_loop()
    key = (owner, settings, id(loop))
    resource = process_local(key, lambda: open(loop))
    if resource.loop is not loop:  # cannot happen while registered; defensive
        _pop(key)
        resource = process_local(key, lambda: open(loop))
    return resource


def pop_loop_resource(owner: str, settings: Hashable) -> Any:
    """Forget the running loop's resource for ``(owner, settings)`` and return it (None:
    there was none); closing it is the caller's job."""
    return _pop((owner, settings, id(asyncio.get_running_loop())))


def _pop(key: Hashable) -> Any:
    global _generation
    _generation += 1
    return pop_process_local(key)


class LoopLocal(Generic[R]):
    """The running loop's resource for one source's settings, opened on first use.

    Guarantees: :meth:`get` returns a resource opened on the running loop, in this
    process, and accepted by ``usable``; equal ``(owner, settings)`` share it. Pickling
    keeps the description only, never a live resource.

    Args:
        owner: names the connector in the registry's keys (``"connectors.http"``).
        settings: hashable and picklable; what makes two sources share a resource.
        open: makes the resource, given the running loop (called on that loop).
        usable: whether a registered resource may still serve (for example its session
            was not closed behind the registry's back); None: always.
    """

    def __init__(
        self,
        owner: str,
        settings: Hashable,
        open: Callable[[asyncio.AbstractEventLoop], R],
        usable: Callable[[R], bool] | None = None,
    ) -> None:
        self._owner = owner
        self._settings = settings
        self._open = open
        self._usable = usable
        self._last: tuple[int, int, R] | None = None  # (pid, generation, resource)

    def get(self) -> R:
        """This process's resource on the running loop (opened now if there is none)."""
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None:
            pid, generation, resource = last
            if (
                generation == _generation
                and resource.loop is loop
                and pid == os.getpid()
                and self._can_serve(resource)
            ):
                return resource
        key = (self._owner, self._settings, id(loop))
        resource = process_local(key, lambda: self._open(loop))
        if resource.loop is not loop or not self._can_serve(resource):
            _pop(key)
            resource = process_local(key, lambda: self._open(loop))
        self._last = (os.getpid(), _generation, resource)
        return resource

    def pop(self) -> R | None:
        """Forget the running loop's resource and return it (None: there was none);
        closing it is the caller's job."""
        self._last = None
        resource: R | None = pop_loop_resource(self._owner, self._settings)
        return resource

    def _can_serve(self, resource: R) -> bool:
        return self._usable is None or self._usable(resource)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_last"] = None  # a live resource never travels
        return state
