"""Per-key retries of the columnar lane: the per-row join's rules, over Arrow answers.

The rules are the per-row join's (:class:`~enrich.lookup.per_row.lookup_join.LookupJoin`):
a key is asked again when its error is retryable (``should_retry_exception``) or it missed
and the strategy retries empty results (``should_retry_result``); ``max_attempts`` counts
every call; when a retry
starts (``retry_at``: the backoff, or an error's longer ``retry_after`` hint) and whether
it is made before the deadline (``starts_in_time``; if not, the last outcome stands) are
the strategy's rules, the ones the per-row join follows. A retry never reads the cache.
Imports no pyspark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pyarrow as pa

from ...engine.mailbox.hold import Deadline
from ...engine.retry import RetryStrategy
from ..contract.columnar_answer import ColumnarAnswer
from ..outcome import MISS_RESULT

# attempt(keys, attempt number) -> their answer (call failures and timeouts as errors)
Attempt = Callable[[pa.Array, int], Awaitable[ColumnarAnswer]]


async def with_retries(
    attempt: Attempt,
    keys: pa.Array,
    answer: ColumnarAnswer,
    retry: RetryStrategy,
    deadline: Deadline | None,
) -> tuple[ColumnarAnswer, int]:
    """``answer`` (the first attempt's, aligned with ``keys``) after the retries it
    calls for; and how many key retries were made."""
    loop = asyncio.get_running_loop()
    retried = 0
    candidates = list(range(len(keys)))
    number = 1
    while candidates and number < retry.max_attempts:
        missing = answer.rows.is_null().to_pylist()
        groups: dict[float, list[int]] = {}  # start time -> key positions
        now = loop.time()
        due = deadline.at() if deadline is not None else None
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
            if retry.starts_in_time(when, due):
                groups.setdefault(when, []).append(position)
        if not groups:
            break
        candidates = [p for group in groups.values() for p in group]
        retried += len(candidates)

        async def again_at(when: float, positions: list[int], number: int) -> ColumnarAnswer:
            await asyncio.sleep(max(0.0, when - loop.time()))
            return await attempt(keys.take(pa.array(positions, pa.int64())), number)

        number += 1
        parts = await asyncio.gather(
            *(again_at(when, positions, number) for when, positions in groups.items())
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
