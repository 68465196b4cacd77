"""The connectors' per-loop registry: sharing, reopening after a pop, loops, pickling."""

from __future__ import annotations

import asyncio
import pickle
from dataclasses import dataclass, field

import pytest

from enrich.protect.loop_local import LoopLocal, loop_resource, pop_loop_resource


@dataclass(eq=False)
class Resource:
    loop: asyncio.AbstractEventLoop
    closed: bool = False
    serial: int = field(default=0)


_opened: list[Resource] = []


def _open(loop: asyncio.AbstractEventLoop) -> Resource:
    resource = Resource(loop, serial=len(_opened))
    _opened.append(resource)
    return resource


def _is_open(resource: Resource) -> bool:
    return not resource.closed


def _local(settings: str) -> LoopLocal[Resource]:
    return LoopLocal("tests.loop_local", settings, _open, _is_open)


@pytest.mark.asyncio
async def test_equal_settings_share_one_resource_and_a_pop_by_either_reopens() -> None:
    first, second = _local("a"), _local("a")
    shared = first.get()
    assert second.get() is shared
    assert first.get() is shared  # remembered: the same one again

    assert second.pop() is shared

    # ``first`` remembered ``shared``: it must not serve it once it left the registry,
    # even though nothing marked it closed.
    fresh = first.get()
    assert fresh is not shared
    assert second.get() is fresh
    assert first.pop() is fresh
    assert second.pop() is None


@pytest.mark.asyncio
async def test_a_resource_closed_behind_the_registry_is_replaced() -> None:
    local = _local("b")
    resource = local.get()
    resource.closed = True
    replacement = local.get()
    assert replacement is not resource and not replacement.closed
    assert local.pop() is replacement


def test_each_loop_gets_its_own_resource() -> None:
    local = _local("c")

    async def use() -> Resource:
        resource = local.get()
        assert resource.loop is asyncio.get_running_loop()
        assert loop_resource("tests.loop_local", "c", _open) is resource  # the plain registry
        assert pop_loop_resource("tests.loop_local", "c") is resource
        return resource

    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        assert first.run_until_complete(use()) is not second.run_until_complete(use())
    finally:
        first.close()
        second.close()


@pytest.mark.asyncio
async def test_pickling_carries_the_description_never_the_resource() -> None:
    local = _local("d")
    before = pickle.dumps(local)
    resource = local.get()
    assert pickle.dumps(local) == before
    copy = pickle.loads(pickle.dumps(local))
    assert copy.get() is resource  # the copy finds the shared one in the registry
    assert copy.pop() is resource
