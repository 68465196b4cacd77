"""Records that wait start as asyncio's C tasks once the runner has seen that they wait
(Python 3.10/3.11, where an eager start leaves a waiting record on asyncio's
pure-Python task); records that answer at once keep their eager start."""

from __future__ import annotations

import asyncio
import sys

import pytest

from enrich import ordered_wait_async, unordered_wait_async
from enrich.engine.mailbox import eager

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12's eager tasks are C tasks"),
]

RECORDS = 3 * eager.SAMPLE


def _python_task() -> bool:
    return isinstance(asyncio.current_task(), asyncio.tasks._PyTask)  # type: ignore[attr-defined]


async def test_records_that_wait_move_to_c_tasks_and_instant_ones_stay_eager() -> None:
    import contextvars

    var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=-1)
    seen: dict[int, bool] = {}

    async def waits(value: int) -> list[int]:
        await asyncio.sleep(0)
        assert var.get() == -1  # each record has a context of its own, C task or not
        var.set(value)
        seen[value] = _python_task()
        if value == RECORDS - 1:
            raise ValueError("the last one fails")
        return [value]

    out: list[int] = []
    with pytest.raises(ValueError, match="the last one fails"):
        async for value in ordered_wait_async(range(RECORDS), waits, capacity=64):
            out.append(value)
    assert out == list(range(RECORDS - 1))  # every output before the error, in order
    assert all(seen[v] for v in range(eager.SAMPLE))  # watched: eager, Python tasks
    assert not any(seen[v] for v in range(eager.SAMPLE + 64, RECORDS))  # then C tasks

    # Records that mostly answer at once (cache hits) keep their eager start.
    steps: list[bool] = []

    async def instant(value: int) -> list[int]:
        steps.append(_python_task())
        if value % 10 == 0:
            await asyncio.sleep(0)
        return [value]

    got = [v async for v in unordered_wait_async(range(RECORDS), instant, capacity=64)]
    assert sorted(got) == list(range(RECORDS))
    assert all(steps)
