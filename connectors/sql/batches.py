"""A call's keys as statements: fitted to the key columns, cut into batches of at most
``max_batch``, the batches sent concurrently, their answers handed over as they arrive.

Guarantees of :func:`batch_answers`:

* A key its column's type refuses is answered by ``refused(key, error)`` (first, in one
  mapping) and never sent.
* Every other key is in exactly one batch; a call's only batch is awaited alone and its
  failure (a ``LookupFailed``) raised; of several batches, a failed one answers each of
  its keys with the error, and when every batch failed the first failure is raised once
  the answers of all were handed over.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from enrich.spi import LookupFailed, answers_as_completed

from .answers import fit_key

__all__ = ("batch_answers",)


async def batch_answers(
    keys: Sequence[Any],
    *,
    kinds: tuple[str, ...],
    max_batch: int,
    refused: Callable[[Any, TypeError], LookupFailed],
    send: Callable[[list[Any]], Awaitable[dict[Any, Any]]],
) -> AsyncIterator[dict[Any, Any]]:
    """The answers of distinct ``keys``, one mapping per batch (see the module).

    Args:
        kinds: per key column, what a key part must be (``connectors.sql.fit_key``).
        refused: the answer of a key that does not fit.
        send: one statement's answers for a batch of fitted keys (raising
            ``LookupFailed`` when the statement failed).
    """
    failed_keys: dict[Any, Any] = {}
    wanted: list[Any] = []
    for key in keys:
        try:
            wanted.append(fit_key(key, kinds))
        except TypeError as exc:
            failed_keys[key] = refused(key, exc)
    if failed_keys:
        yield failed_keys
    batches = [wanted[i : i + max_batch] for i in range(0, len(wanted), max_batch)]
    if not batches:
        return
    if len(batches) == 1:  # alone, the batch's failure is the call's: raised
        yield await send(batches[0])
        return

    async def settled(batch: list[Any]) -> Any:
        try:
            return await send(batch)
        except LookupFailed as exc:
            return exc  # its keys' answer; the call goes on

    calls = {n: settled(batch) for n, batch in enumerate(batches)}
    failures: list[LookupFailed] = []
    async for done in answers_as_completed(calls):
        for n, answers in done.items():
            if isinstance(answers, LookupFailed):
                failures.append(answers)
                answers = dict.fromkeys(batches[n], answers)
            yield answers
    if len(failures) == len(batches):
        raise failures[0]
