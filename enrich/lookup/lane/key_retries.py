"""Per-key retries of the columnar lane: the per-row join's rules, over Arrow answers.

The rules are the per-row join's (:class:`~enrich.lookup.per_row.lookup_join.LookupJoin`):
a key is asked again when its error is retryable (``should_retry_exception``) or it missed
and the strategy retries empty results (``should_retry_result``); ``max_attempts`` counts
every call; when a retry
starts (``retry_at``: the backoff, or an error's longer ``retry_after`` hint) and whether
it is made before the key's time is out (``starts_in_time``; if not, the last outcome
stands) are the strategy's rules, the ones the per-row join follows. The wait before a
retry counts against the key's timeout, as its calls do (a
:class:`~enrich.lookup.lane.source_calls.Budget`). A retry never reads the cache.
Imports no pyspark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pyarrow as pa

from ...engine.retry import RetryStrategy
from ..contract.columnar_answer import ColumnarAnswer
from ..outcome import MISS_RESULT
from .source_calls import Budget

# attempt(keys, attempt number, their budget) -> their answer (call failures and
# timeouts as errors); the budget, when given, is charged the attempt's time.
Attempt = Callable[[pa.Array, int, Budget | None], Awaitable[ColumnarAnswer]]


async def with_retries(
    attempt: Attempt,
    keys: pa.Array,
    answer: ColumnarAnswer,
    retry: RetryStrategy,
    budget: Budget | None,
) -> tuple[ColumnarAnswer, int]:
    """``answer`` (the first attempt's, aligned with ``keys``) after the retries it
    calls for; and how many key retries were made. ``budget`` (aligned with ``keys``,
    None: no timeout) is what is left of each key's timeout; it is charged the retries'
    waits and calls."""
    loop = asyncio.get_running_loop()
    retried = 0
    candidates = list(range(len(keys)))
    number = 1
    while candidates and number < retry.max_attempts:
        missing = answer.rows.is_null().to_pylist()
        groups: dict[float, list[int]] = {}  # start time -> key positions
        now = loop.time()
        for position in candidates:
            error = answer.errors.get(position)
            if error is not None:
                again = retry.should_retry_exception(error)
            else:
                again = (
                    missing[position]
                    and position not in answer.multi
                    and retry.should_retry_result(MISS_RESULT)
                )
            if not again:
                continue
            when = retry.retry_at(number, now, error)
            due = budget.due(position, now) if budget is not None else None
            if retry.starts_in_time(when, due):
                groups.setdefault(when, []).append(position)
        if not groups:
            break
        candidates = [p for group in groups.values() for p in group]
        retried += len(candidates)

        async def again_at(
            when: float, positions: list[int], number: int, since: float
        ) -> ColumnarAnswer:
            await asyncio.sleep(max(0.0, when - loop.time()))
            asked = keys.take(pa.array(positions, pa.int64()))
            if budget is None:
                return await attempt(asked, number, None)
            part = budget.take(positions)
            part.spend(0, len(positions), loop.time() - since)  # the wait counts
            answer = await attempt(asked, number, part)
            budget.put(positions, part)
            return answer

        number += 1
        parts = await asyncio.gather(
            *(again_at(when, positions, number, now) for when, positions in groups.items())
        )
        for positions, part in zip(groups.values(), parts, strict=True):
            answer = _replace(answer, positions, part)
    return answer, retried


def _replace(answer: ColumnarAnswer, positions: list[int], part: ColumnarAnswer) -> ColumnarAnswer:
    """``answer`` with the keys at ``positions`` answered by ``part`` (aligned with them)."""
    size = len(answer)
    index = list(range(size))
    errors = dict(answer.errors)
    multi = dict(answer.multi)
    for j, position in enumerate(positions):
        index[position] = size + j
        errors.pop(position, None)
        multi.pop(position, None)
        if j in part.errors:
            errors[position] = part.errors[j]
        if j in part.multi:
            multi[position] = part.multi[j]
    rows = pa.concat_arrays([answer.rows, part.rows]).take(pa.array(index, pa.int64()))
    return ColumnarAnswer(rows, errors, multi)
