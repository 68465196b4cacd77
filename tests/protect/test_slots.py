"""Request slots (enrich.protect.slots): the bound, the order of waiters, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from enrich.protect.slots import Slots


def test_a_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit must be > 0, got 0"):
        Slots(0)


def test_free_slots_are_taken_at_once_up_to_the_limit() -> None:
    slots = Slots(2)

    assert [slots.take(), slots.take(), slots.take()] == [True, True, False]
    assert slots.in_use() == 2
    slots.release()
    assert slots.in_use() == 1
    assert slots.take()


@pytest.mark.asyncio
async def test_a_free_slot_is_taken_without_yielding_to_the_loop() -> None:
    slots = Slots(1)
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "other")

    await slots.wait()

    assert ran == []  # wait() returned before the loop ran anything else
    assert slots.in_use() == 1


@pytest.mark.asyncio
async def test_waiters_get_released_slots_in_order_before_newcomers() -> None:
    slots = Slots(1)
    assert slots.take()
    order: list[int] = []

    async def holder(n: int) -> None:
        await slots.wait()
        order.append(n)
        slots.release()

    waiting = [asyncio.create_task(holder(n)) for n in range(3)]
    await asyncio.sleep(0)  # all three wait now
    slots.release()
    assert not slots.take()  # the released slot went to the first waiter, not to us
    await asyncio.gather(*waiting)

    assert order == [0, 1, 2]
    assert slots.in_use() == 0


@pytest.mark.asyncio
async def test_a_cancelled_waiter_holds_no_slot_and_passes_on_one_it_was_handed() -> None:
    slots = Slots(1)
    assert slots.take()
    first = asyncio.create_task(slots.wait())
    second = asyncio.create_task(slots.wait())
    await asyncio.sleep(0)

    slots.release()  # handed to ``first``...
    first.cancel()  # ...which is cancelled before it resumes: ``second`` gets the slot
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, timeout=30)  # a hang guard: it gets the slot at once
    assert slots.in_use() == 1

    third = asyncio.create_task(slots.wait())
    await asyncio.sleep(0)
    third.cancel()  # cancelled while it waits: nothing held, nothing owed
    with pytest.raises(asyncio.CancelledError):
        await third
    slots.release()
    assert slots.in_use() == 0
    assert slots.take()


@pytest.mark.asyncio
async def test_many_tasks_never_hold_more_than_the_limit() -> None:
    slots = Slots(3)
    held = peak = 0

    async def one() -> None:
        nonlocal held, peak
        if not slots.take():
            await slots.wait()
        try:
            held += 1
            peak = max(peak, held)
            await asyncio.sleep(0)
            held -= 1
        finally:
            slots.release()

    await asyncio.gather(*(one() for _ in range(50)))

    assert peak == 3
    assert slots.in_use() == 0


def test_a_lower_limit_takes_effect_as_held_slots_come_back() -> None:
    slots = Slots(4)
    assert all(slots.take() for _ in range(4))

    slots.resize(2)

    assert not slots.take()
    slots.release()
    slots.release()
    assert not slots.take()  # two still held: at the new limit
    slots.release()
    assert slots.take()
    assert slots.in_use() == 2


@pytest.mark.asyncio
async def test_a_higher_limit_hands_its_new_slots_to_waiters_at_once() -> None:
    slots = Slots(1)
    assert slots.take()
    waiters = [asyncio.ensure_future(slots.wait()) for _ in range(3)]
    await asyncio.sleep(0)

    slots.resize(3)
    await asyncio.sleep(0)

    assert [w.done() for w in waiters] == [True, True, False]
    assert slots.in_use() == 3
    with pytest.raises(ValueError, match="limit must be > 0, got 0"):
        slots.resize(0)
    waiters[2].cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
