"""Batch mode of the HTTP connector: keys POSTed in chunks, one JSON object answering each.

A call's keys are cut into chunks of ``max_batch``; each chunk is one POST of the keys
as a JSON array (a composite key as an array), answered by a JSON object mapping each
key's :func:`batch_key` to its document (null or absent: a miss). A POST that fails, or
whose answer is not such an object, is the error of every key of its chunk; when every
chunk of a call failed, the call fails with the first chunk's error.

:class:`Batches` does this for ``lookup_many`` and ``lookup_each``, decoding each key's
document by the per-value decoder; the columnar lookup (:mod:`connectors.http.arrow`)
uses its :meth:`~Batches.post` and :meth:`~Batches.parse` and decodes in bulk.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from enrich.spi import DecodeError, LookupFailed, answers_as_completed, short

from . import body
from .pool import Pool
from .request import send
from .settings import Settings

# The connector's one logger, whichever of its modules logs.
_log = logging.getLogger("connectors.http")


def batch_key(key: Any) -> str:
    """What the batch answer names ``key`` by: ``str(key)``, or a composite key's
    compact JSON text (``'["acme","u1"]'``)."""
    if isinstance(key, tuple):
        return body.dumps(list(key)).decode()
    return str(key)


def first_failure(outcomes: Sequence[object]) -> Exception | None:
    """The first outcome when every one is an exception (the call fails), else None."""
    if outcomes and all(isinstance(outcome, Exception) for outcome in outcomes):
        first = outcomes[0]
        assert isinstance(first, Exception)
        return first
    return None


@dataclass(frozen=True)
class Batches:
    """A batch-mode source's requests and per-key answers.

    Attributes:
        settings: the source's settings (``batch`` is set).
        target: what errors name: ``POST`` and the masked batch URL.
        loads: the JSON parser of the schema (exact decimals when it holds one).
        rows: a document -> the key's value (row, rows or None); raises DecodeError.
    """

    settings: Settings
    target: str
    loads: Callable[[bytes], Any]
    rows: Callable[[Any], Any]

    def chunks(self, keys: Sequence[Any]) -> list[Sequence[Any]]:
        """``keys`` cut into the chunks of ``max_batch`` that are POSTed one by one."""
        size = self.settings.max_batch
        return [keys[i : i + size] for i in range(0, len(keys), size)]

    async def post(self, pool: Pool, chunk: Sequence[Any]) -> bytes | LookupFailed:
        """One POST of ``chunk``: the answer's body, or the request's error."""
        batch = self.settings.batch
        assert batch is not None
        data = body.dumps([list(key) if isinstance(key, tuple) else key for key in chunk])
        try:
            payload = await send(
                pool, self.settings, "POST", batch.url(), key=None, data=data, target=self.target
            )
        except LookupFailed as exc:
            _log.debug("batch of %d key(s) failed: %s", len(chunk), exc)
            return exc
        return payload or b"null"

    def parse(self, payload: bytes, keys: int) -> Mapping[str, Any] | DecodeError:
        """The answer object of a POST of ``keys`` keys, or why it is unreadable."""
        try:
            answer = body.loads(payload, self.loads)
            if not isinstance(answer, Mapping):
                raise DecodeError(
                    f"batch answer must be a JSON object keyed by str(key), got {short(answer)}",
                    value=answer,
                )
        except DecodeError as exc:
            _log.debug("batch of %d key(s) failed: %s", keys, exc)
            return exc
        return answer

    async def lookup_chunk(
        self, pool: Pool, chunk: Sequence[Any]
    ) -> dict[Any, Any] | LookupFailed | DecodeError:
        """Each key of ``chunk`` -> its value or its own DecodeError; or the chunk's error."""
        payload = await self.post(pool, chunk)
        if isinstance(payload, LookupFailed):
            return payload
        answer = self.parse(payload, len(chunk))
        if isinstance(answer, DecodeError):
            return answer
        result: dict[Any, Any] = {}
        for key in chunk:
            try:
                result[key] = self.rows(answer.get(batch_key(key)))
            except DecodeError as exc:
                result[key] = exc
        return result

    async def lookup_many(self, pool: Pool, keys: Sequence[Any]) -> dict[Any, Any]:
        """``lookup_many`` in batch mode: the chunks' POSTs concurrently.

        Raises:
            LookupFailed, DecodeError: every chunk failed (the first chunk's error).
        """
        chunks = self.chunks(keys)
        outcomes = await asyncio.gather(*(self.lookup_chunk(pool, chunk) for chunk in chunks))
        failed = first_failure(outcomes)
        if failed is not None:
            raise failed
        result: dict[Any, Any] = {}
        for chunk, outcome in zip(chunks, outcomes, strict=True):
            if isinstance(outcome, Exception):
                result.update(dict.fromkeys(chunk, outcome))
            else:
                result.update(outcome)
        return result

    async def lookup_each(
        self, pool: Pool, keys: Sequence[Any]
    ) -> AsyncIterator[Mapping[Any, Any]]:
        """``lookup_each`` in batch mode: each POST's answers as soon as it completes.

        Raises:
            LookupFailed, DecodeError: every chunk failed: the error of the chunk that
                failed last (the earlier ones' keys were handed over with theirs).
        """
        chunks = self.chunks(keys)
        calls = {n: self.lookup_chunk(pool, chunk) for n, chunk in enumerate(chunks)}
        failures = 0
        async for found in answers_as_completed(calls):
            for n, outcome in found.items():
                if not isinstance(outcome, Exception):
                    yield outcome
                elif failures + 1 == len(chunks):
                    raise outcome  # every POST of the call failed: the call fails
                else:
                    failures += 1
                    yield dict.fromkeys(chunks[n], outcome)
