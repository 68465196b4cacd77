"""The operator and the join retry only errors that may pass on a second try."""

from __future__ import annotations

import pytest

from enrich import (
    DecodeError,
    FixedDelayRetry,
    LookupFailed,
    SchemaError,
    is_retryable,
    lookup_chunks_async,
    ordered_wait_async,
)
from enrich.testing import FakeClock, FakeFunction, FakeSource, drive


def test_the_default_predicate_honours_what_each_error_says() -> None:
    assert not is_retryable(DecodeError("field 'credit': cannot read 'abc' as double"))
    assert not is_retryable(SchemaError("no such type"))
    assert not is_retryable(LookupFailed("HTTP 400", kind="status:400", retryable=False))
    assert is_retryable(LookupFailed("HTTP 503", kind="status:503"))
    assert is_retryable(RuntimeError("a user function's own error"))


@pytest.mark.asyncio
async def test_the_operator_does_not_retry_a_decode_error() -> None:
    clock = FakeClock()
    fn = FakeFunction(clock=clock, fail={"x": 9}, error=DecodeError("not JSON"))
    it = ordered_wait_async(["x"], fn, retry=FixedDelayRetry(4, 0.01), clock=clock)

    async def run() -> list[object]:
        return [out async for out in it]

    with pytest.raises(DecodeError):
        await drive(clock, run())
    assert fn.calls == ["x"]


@pytest.mark.asyncio
async def test_the_join_does_not_retry_a_key_that_does_not_decode() -> None:
    clock = FakeClock()
    source = FakeSource({1: DecodeError("not JSON"), 2: ("b",)}, clock=clock, latency=0.1)
    it = lookup_chunks_async(
        [("c", [1, 2])],
        source,
        on_error="error_column",
        retry=FixedDelayRetry(4, 0.01),
        clock=clock,
    )

    async def run() -> list[object]:
        return [out async for out in it]

    (chunk,) = await drive(clock, run())
    assert chunk.rows == [None, ("b",)]
    assert chunk.errors == ["decode: not JSON", None]
    assert source.requests == [[1, 2]]
