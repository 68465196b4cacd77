"""The blocking iterators, driven from ordinary threads (as a Spark task thread does)."""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
from typing import Any

import pytest

import enrich
from enrich import AsyncFunction, ResultFuture, ordered_wait, unordered_wait
from enrich.engine.runtime import get_loop, run_sync
from enrich.testing import FakeClock, FakeFunction, ManualFunction


def run_in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    """Poll a condition set by another thread (bounded; not a sleep to wait for time)."""
    event = threading.Event()
    deadline = threading.Timer(timeout, event.set)
    deadline.start()
    try:
        while not predicate():
            if event.wait(0.001):
                raise AssertionError("condition not reached in time")
    finally:
        deadline.cancel()


def test_ordered_and_unordered_from_the_main_thread() -> None:
    async def slow_first(value: int) -> list[int]:
        for _ in range(10 - value):
            await asyncio.sleep(0)
        return [value]

    assert list(ordered_wait(range(10), slow_first)) == list(range(10))
    assert sorted(unordered_wait(range(10), slow_first)) == list(range(10))


def test_the_producer_blocks_when_capacity_is_full() -> None:
    manual = ManualFunction()
    pulled: list[int] = []

    def source():
        for i in range(10):
            pulled.append(i)
            yield i

    thread, box = run_in_thread(lambda: list(ordered_wait(source(), manual, capacity=4)))
    wait_for(lambda: len(manual.pending) == 4)
    assert pulled == [0, 1, 2, 3]  # blocked: nothing buffered beyond capacity
    manual.complete(1, ["one"])  # not the head: frees nothing in ORDERED mode
    manual.complete(0, ["zero"])
    wait_for(lambda: len(manual.pending) == 6)
    assert len(pulled) == 6
    for value in range(2, 10):
        wait_for(lambda v=value: v in manual.pending)
        manual.complete(value, [value])
    thread.join(10)
    assert box["result"] == ["zero", "one", *range(2, 10)]


def test_timeouts_with_a_fake_clock_advanced_from_another_thread() -> None:
    clock = FakeClock()
    manual = ManualFunction()
    it = ordered_wait(["a", "b"], manual, timeout=3.0, clock=clock)
    thread, box = run_in_thread(lambda: list(it))
    wait_for(lambda: len(manual.pending) == 2)
    manual.complete("a", ["A"])
    clock.advance(2.999)
    assert thread.is_alive()
    clock.advance(0.001)
    thread.join(10)
    assert isinstance(box["error"], enrich.LookupTimeout)
    assert box["error"].value == "b"
    assert clock.now() == 3.0


def test_an_error_reaches_the_consumer_and_nothing_is_left_running() -> None:
    class Fails(AsyncFunction):
        closed = threading.Event()

        async def invoke(self, value: int) -> list[int]:
            if value == 5:
                raise ValueError(f"bad value {value}")
            if value > 5:
                await asyncio.sleep(60)  # still running when the error arrives
            return [value]

        def close(self) -> None:
            Fails.closed.set()

    received = []
    with pytest.raises(ValueError, match="bad value 5"):
        for item in ordered_wait(range(20), Fails(), capacity=10):
            received.append(item)
    assert received == [0, 1, 2, 3, 4]
    assert Fails.closed.is_set()

    async def leftover() -> list[asyncio.Task[Any]]:
        await asyncio.sleep(0)
        return [t for t in asyncio.all_tasks() if "invoke" in repr(t)]

    assert run_sync(leftover) == []


def test_breaking_out_early_closes_the_function() -> None:
    fn = FakeFunction()
    for item in ordered_wait(range(1000), fn, capacity=10):
        if item == 3:
            break
    # The generator is closed when dropped; CPython does so at once.
    assert fn.closed == 1
    assert len(fn.calls) < 1000


def test_results_completed_from_foreign_threads() -> None:
    class Threaded(AsyncFunction):
        def async_invoke(self, value: int, result: ResultFuture) -> None:
            threading.Thread(target=result.complete, args=([value],)).start()

    assert list(ordered_wait(range(200), Threaded(), capacity=16)) == list(range(200))


def test_several_threads_share_the_process_loop() -> None:
    loops: set[int] = set()

    async def record_loop(value: int) -> list[int]:
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0)
        return [value]

    runs = [run_in_thread(lambda: list(ordered_wait(range(300), record_loop))) for _ in range(4)]
    for thread, box in runs:
        thread.join(30)
        assert box["result"] == list(range(300))
    assert loops == {id(get_loop())}


def test_calling_the_blocking_iterator_on_the_loop_thread_is_refused() -> None:
    async def inner() -> Any:
        with pytest.raises(RuntimeError, match="ordered_wait_async"):
            next(ordered_wait([1], FakeFunction()))
        return True

    assert run_sync(inner)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_loop_of_its_own() -> None:
    parent_loop = get_loop()
    assert list(ordered_wait([1, 2], FakeFunction())) == [1, 2]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: must not touch the parent's loop thread (it is not here)
        try:
            child_loop = get_loop()
            out = list(ordered_wait([3, 4], FakeFunction(lambda v: [v * 10])))
            os.write(write, pickle.dumps((out, child_loop is parent_loop)))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out, same = pickle.loads(pipe.read())
    os.waitpid(pid, 0)
    assert out == [30, 40]
    assert same is False
