"""A user's function behind the operator (enrich/maps/calls.py): one output per row,
error policies, the timeout hook, retries on the user's own results, batches, and the
function opened once per process. Fake clock: exact and sleep-free."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from enrich import AsyncFunction, FixedDelayRetry, LookupTimeout, ResultFuture, retry_on_empty
from enrich.engine.caller.wait import AsyncWaitAsyncIterator
from enrich.engine.records.call_metrics import JoinMetrics
from enrich.engine.records.failure import Failed
from enrich.engine.wait_settings import WaitSettings
from enrich.maps import process
from enrich.maps.calls import BatchShapeError, call_for, user_retry
from enrich.testing import FakeClock, drive

pytestmark = pytest.mark.asyncio


def records(rows: Sequence[Any]) -> list[tuple[int, Any]]:
    return list(enumerate(rows))


async def run(fn: Any, rows: Sequence[Any], *, policy: str = "fail", **settings: Any) -> Any:
    clock = settings.pop("clock", None) or FakeClock()
    batched = "batch_size" in settings
    call = call_for(
        fn, batched, key=object(), name="test", policy=policy, metrics=JoinMetrics(), clock=clock
    )
    retry = user_retry(settings.pop("retry", None))
    it = AsyncWaitAsyncIterator(
        records(rows), call, settings=WaitSettings(retry=retry, **settings), clock=clock
    )
    out = await drive(clock, _collect(it))
    return out, call.metrics, clock


async def _collect(it: Any) -> list[Any]:
    return [item async for item in it]


async def test_each_row_has_one_output_whatever_the_function_returned() -> None:
    answers = {0: {"a": 1}, 1: [{"a": 2}, {"a": 3}], 2: [], 3: None}

    async def fn(row: int) -> Any:
        return answers[row]

    out, metrics, _ = await run(fn, [0, 1, 2, 3], timeout=None)
    assert out == [(0, {"a": 1}), (1, [{"a": 2}, {"a": 3}]), (2, []), (3, None)]
    assert (metrics.requests, metrics.keys_requested) == (4, 4)


async def test_a_failed_row_is_kept_with_its_error_or_fails_the_run() -> None:
    async def fn(row: int) -> Any:
        if row == 1:
            raise ValueError("no score for 1")
        return {"a": row}

    out, metrics, _ = await run(fn, [0, 1, 2], policy="error_column", timeout=None)
    assert [o for _, o in out if not isinstance(o, Failed)] == [{"a": 0}, {"a": 2}]
    ((position, failed),) = [(p, o) for p, o in out if isinstance(o, Failed)]
    assert position == 1 and str(failed.error) == "no score for 1"
    assert metrics.errors == {"ValueError": 1}
    with pytest.raises(ValueError, match="no score for 1"):
        await run(fn, [0, 1, 2], policy="fail", timeout=None)


async def test_a_row_that_runs_out_of_time_is_a_timeout_error() -> None:
    clock = FakeClock()

    async def fn(row: int) -> Any:
        await clock.sleep(5.0 if row else 0.5)
        return {"a": row}

    out, metrics, _ = await run(fn, [0, 1], policy="null", timeout=1.0, clock=clock)
    assert out[0] == (0, {"a": 0})
    assert isinstance(out[1][1], Failed) and isinstance(out[1][1].error, LookupTimeout)
    assert (metrics.timeouts, metrics.errors["timeout"]) == (1, 1)
    assert clock.now() == 1.0


async def test_the_timeout_hook_of_an_async_function_gives_a_fallback() -> None:
    clock = FakeClock()

    class Slow(AsyncFunction):
        async def invoke(self, row: int) -> list[dict[str, int]]:
            await clock.sleep(10.0)
            return [{"a": row}]

        def timeout(self, row: int, result: ResultFuture) -> None:
            result.complete([{"a": -1}])

    out, metrics, _ = await run(Slow(), [7], timeout=2.0, clock=clock)
    assert out == [(0, [{"a": -1}])]
    assert metrics.errors == {}


async def test_a_callback_style_function_completes_its_rows_later() -> None:
    class Callback(AsyncFunction):
        def async_invoke(self, row: int, result: ResultFuture) -> None:
            asyncio.get_running_loop().call_soon(result.complete, [{"a": row * 10}])

    out, metrics, _ = await run(Callback(), [1, 2], timeout=None)
    assert out == [(0, [{"a": 10}]), (1, [{"a": 20}])]
    assert metrics.requests == 2


async def test_a_retry_on_result_sees_what_the_function_returned() -> None:
    calls: list[int] = []

    async def fn(row: int) -> Any:
        calls.append(row)
        return None if calls.count(row) == 1 else {"a": row}  # a miss, then a hit

    retry = FixedDelayRetry(3, 0.1, retry_on_result=retry_on_empty)
    out, _, clock = await run(fn, [5], retry=retry, timeout=None)
    assert out == [(0, {"a": 5})]
    assert calls == [5, 5] and clock.now() == 0.1


async def test_an_error_is_retried_and_a_final_one_is_not() -> None:
    attempts: list[int] = []

    class Final(ValueError):
        retryable = False

    async def fn(row: int) -> Any:
        attempts.append(row)
        if row == 0 and attempts.count(0) < 3:
            raise ConnectionError("refused")
        if row == 1:
            raise Final("bad input")
        return {"a": row}

    out, _, _ = await run(fn, [0, 1], policy="null", retry=FixedDelayRetry(5, 0.0), timeout=None)
    assert out[0] == (0, {"a": 0})
    assert attempts.count(0) == 3 and attempts.count(1) == 1


class Batched(AsyncFunction):
    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    async def invoke(self, rows: list[int]) -> list[Any]:
        self.calls.append(list(rows))
        return [{"a": row} for row in rows]


async def test_a_batch_function_gets_batches_and_answers_each_row() -> None:
    fn = Batched()
    out, metrics, _ = await run(fn, list(range(7)), batch_size=3, timeout=None)
    assert out == [(i, {"a": i}) for i in range(7)]
    assert fn.calls == [[0, 1, 2], [3, 4, 5], [6]]
    assert (metrics.requests, metrics.keys_requested) == (3, 7)


async def test_a_batch_answer_of_the_wrong_length_fails_its_rows() -> None:
    async def short(rows: list[int]) -> list[Any]:
        return [{"a": 1}]

    out, metrics, _ = await run(
        short,
        [0, 1],
        policy="error_column",
        batch_size=2,
        timeout=None,
        retry=FixedDelayRetry(3, 0.0),
    )
    errors = [o.error for _, o in out]
    assert all(isinstance(e, BatchShapeError) for e in errors)
    assert "2 rows, got 1 results" in str(errors[0])
    assert metrics.requests == 1  # a wrong shape is final: not retried


async def test_an_async_function_is_opened_once_per_process_and_map(monkeypatch: Any) -> None:
    monkeypatch.setattr(process, "_opened", {})
    monkeypatch.setattr(process, "_users", {})
    opened: list[str] = []

    class Counted(AsyncFunction):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        async def open(self) -> None:
            opened.append(self.tag)

        async def invoke(self, row: int) -> list[dict[str, str]]:
            return [{"tag": self.tag}]

    key = "map-1"
    first = await process.opened(key, Counted("first"))
    again = await process.opened(key, Counted("second copy of the same map"))
    other = await process.opened("map-2", Counted("another map"))
    assert first is again and first.tag == "first"
    assert other.tag == "another map"
    assert opened == ["first", "another map"]


async def test_user_retry_keeps_a_strategy_without_a_result_predicate() -> None:
    plain = FixedDelayRetry(2, 0.5)
    assert user_retry(plain) is plain and user_retry(None) is None
    wrapped = user_retry(FixedDelayRetry(2, 0.5, retry_on_result=retry_on_empty))
    assert wrapped is not None and wrapped.retry_on_result is not None
    assert wrapped.retry_on_result([(0, None)]) and wrapped.retry_on_result([(0, [])])
    assert not wrapped.retry_on_result([(0, {"a": 1})])
    assert not wrapped.retry_on_result([(0, Failed(ValueError()))])


async def test_the_last_run_of_a_map_closes_its_function(monkeypatch: Any) -> None:
    """Runs of one map overlapping in a process share its opening; the last to end
    closes it, and the next run opens it afresh."""
    monkeypatch.setattr(process, "_opened", {})
    monkeypatch.setattr(process, "_users", {})
    events: list[str] = []

    class Tracked(AsyncFunction):
        async def open(self) -> None:
            events.append("open")

        async def close(self) -> None:
            events.append("close")

        async def invoke(self, row: int) -> list[dict[str, int]]:
            return [{"n": row}]

    await process.opened("m", Tracked())
    await process.opened("m", Tracked())
    await process.released("m")
    assert events == ["open"]
    await process.released("m")
    assert events == ["open", "close"]
    await process.opened("m", Tracked())
    await process.released("m")
    assert events == ["open", "close", "open", "close"]
