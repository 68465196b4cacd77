"""The columnar lane's calls to its source: one attempt for a chunk's keys, on the loop.

An attempt splits the keys into calls of at most ``max_batch`` keys (one call when the
source bounds its own requests), runs them concurrently, and returns their parts in key
order: answers, or replies still to decode (:class:`Fetched`, from a source's
``fetch_arrow``). :meth:`LaneCalls.settle` turns the parts into one answer on whichever
thread calls it. A call that raises, a decode step that raises, or a call still out at
its deadline fails only its own keys.

A timeout measures the store. Each call has its own deadline: it starts when the call
starts and moves on while the call waits for something other than the store's answer
(a pool's connection, a rate limit's permit, a full cache's load: whatever the source
marks with :class:`~enrich.engine.mailbox.hold.held_back`, in the call's own
:class:`~enrich.engine.mailbox.hold.Hold`). So rows queued behind our own requests never
time out, while a call the store does not answer fails its keys after about the timeout.
With retries a key's timeout covers all its calls and the waits between them: each call
gets what is left of its keys' budget (:class:`Budget`).

Imports no pyspark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from ..._errors import LookupTimeout
from ...engine.clock import LoopClock
from ...engine.mailbox.within import call_within
from ..contract.columnar_answer import (
    ColumnarAnswer,
    ColumnarSource,
    Decode,
    concat_answers,
    rows_to_struct,
)


@dataclass(slots=True)
class Fetched:
    """A call's answer still to decode: its keys, its attempt number and decode step."""

    keys: pa.Array
    number: int
    decode: Decode


Part = ColumnarAnswer | Fetched


@dataclass(slots=True)
class Resolved:
    """What the loop found for a chunk's distinct keys, and its counters.

    ``parts``, when set, are the answer still to settle on the task thread (aligned with
    the asked keys, in order), and ``probe`` what the cache held for the other keys
    (a :class:`~enrich.lookup.lane.cache_probe.CacheProbe`, or None without a cache);
    ``probe`` without ``parts``: the cache held every key, and the task thread takes
    the rows from the probe; otherwise ``answer`` is the answer."""

    answer: ColumnarAnswer
    parts: list[Part] | None = None
    requests: int = 0
    keys_requested: int = 0
    latencies: list[float] = field(default_factory=list)
    cache_hits: int = 0
    cache_misses: int = 0
    retries: int = 0
    probe: Any = None


class Budget:
    """What is left of each key's timeout, in seconds (aligned with the keys a chunk
    asks its source for).

    A key's timeout covers its calls to the store and the waits between its retries,
    never its waits for a connection, a permit or a load: a call is charged its time
    less the time its hold was held (:meth:`LaneCalls.attempt`), a retry the wait
    before it (:func:`~enrich.lookup.lane.key_retries.with_retries`).
    """

    __slots__ = ("left",)

    def __init__(self, left: np.ndarray[Any, np.dtype[np.float64]]) -> None:
        self.left = left

    @classmethod
    def full(cls, keys: int, seconds: float) -> Budget:
        """``keys`` keys, each with the whole ``seconds``."""
        return cls(np.full(keys, seconds, dtype=np.float64))

    def seconds(self, start: int, stop: int) -> float:
        """The time a call for the keys ``start:stop`` may take: the least that is left
        to any of them."""
        return float(self.left[start:stop].min())

    def spend(self, start: int, stop: int, seconds: float) -> None:
        """Charge the keys ``start:stop`` ``seconds``."""
        self.left[start:stop] -= seconds

    def due(self, position: int, now: float) -> float:
        """When the key at ``position`` is out of time, as seen at ``now``."""
        return now + float(self.left[position])

    def take(self, positions: list[int]) -> Budget:
        """The budget of the keys at ``positions`` (a copy, aligned with them)."""
        return Budget(self.left[positions])

    def put(self, positions: list[int], part: Budget) -> None:
        """Write back what :meth:`take` took, after it was charged."""
        self.left[positions] = part.left


class LaneCalls:
    """How a lane asks its source (see the module docstring).

    Args:
        source: a :class:`ColumnarSource`.
        struct_type: the Arrow struct of the dimension fields.
        timeout: the join's timeout (named in a :class:`LookupTimeout`), or None.
        max_batch: keys per call at most.
    """

    __slots__ = ("max_batch", "source", "struct_type", "timeout")

    def __init__(
        self,
        source: ColumnarSource,
        struct_type: pa.StructType,
        timeout: float | None,
        max_batch: int,
    ) -> None:
        self.source = source
        self.struct_type = struct_type
        self.timeout = timeout
        self.max_batch = max_batch

    async def attempt(
        self, keys: pa.Array, number: int, budget: Budget | None, resolved: Resolved
    ) -> list[Part]:
        """One attempt for ``keys``: calls of at most ``max_batch`` keys, concurrently,
        each with its own deadline (what is left of ``budget`` for its keys; None: no
        timeout). A call that raises fails its keys, one still out at its deadline
        times them out; cancelling the attempt (the lane closed) cancels its calls.
        ``budget`` is charged what each call spent at the store. The parts, in key
        order, are still to settle (:meth:`settle`)."""
        loop = asyncio.get_running_loop()
        size = self.max_batch
        if getattr(self.source, "splits_requests", False):
            # The source bounds its own requests (RedisLookup: MGETs of its max_batch,
            # pipelined); one call per attempt lets it decode them in one go, which
            # costs one GIL hand-over instead of one per request (measured: the decoder
            # releases the GIL and then waits up to the switch interval to get it back).
            size = max(1, len(keys))
        calls = [
            loop.create_task(self._timed(keys, start, size, number, budget, resolved))
            for start in range(0, len(keys), size)
        ]
        # gather cancels the calls when the attempt is cancelled; _timed raises nothing
        # else.
        return list(await asyncio.gather(*calls))

    async def _timed(
        self,
        keys: pa.Array,
        start: int,
        size: int,
        number: int,
        budget: Budget | None,
        resolved: Resolved,
    ) -> Part:
        """The call for ``keys[start:start + size]`` within its deadline; its part."""
        part = keys.slice(start, size)
        if budget is None:
            try:
                return await self._call(part, number, resolved)
            except Exception as error:  # the call's own failure: its keys' outcome
                return self.failed(part, error, number)
        # The call's own hold and deadline: a source marks its waits for a connection,
        # a permit or a load (held_back), and they move this call's deadline alone.
        stop = start + len(part)
        timed = await call_within(
            partial(self._call, part, number, resolved),
            budget.seconds(start, stop),
            LoopClock(asyncio.get_running_loop()),
        )
        budget.spend(start, stop, timed.spent)
        if timed.late:
            return self.failed(part, None, number)
        call = timed.task
        raised = call.exception()
        if raised is not None:
            return self.failed(part, raised, number)
        return call.result()

    async def _call(self, keys: pa.Array, number: int, resolved: Resolved) -> Part:
        loop = asyncio.get_running_loop()
        resolved.requests += 1
        resolved.keys_requested += len(keys)
        fetch = getattr(self.source, "fetch_arrow", None)
        started = loop.time()
        try:
            if fetch is not None:
                return Fetched(keys, number, await fetch(keys, self.struct_type))
            answer = await self.source.lookup_arrow(keys, self.struct_type)
        finally:
            resolved.latencies.append(loop.time() - started)
        _check_length(answer, keys)
        return answer

    def settle(self, parts: Sequence[Part]) -> ColumnarAnswer:
        """The answer of an attempt's parts, decoding the fetched ones (on the calling
        thread); a decode step that raises fails its call's keys, as a call that raises
        does."""
        answers: list[ColumnarAnswer] = []
        for part in parts:
            if isinstance(part, Fetched):
                try:
                    decoded = part.decode()
                    _check_length(decoded, part.keys)
                except Exception as error:  # the call's own failure, as on the loop
                    decoded = self.failed(part.keys, error, part.number)
                answers.append(decoded)
            else:
                answers.append(part)
        if not answers:
            return ColumnarAnswer(rows_to_struct([], self.struct_type))
        return concat_answers(answers, self.struct_type)

    def failed(self, keys: pa.Array, error: BaseException | None, number: int) -> ColumnarAnswer:
        """Every key of a call that raised (``error``) or timed out (None)."""
        listed = keys.to_pylist()
        errors: dict[int, BaseException] = {}
        for position, key in enumerate(listed):
            errors[position] = (
                error
                if error is not None
                else LookupTimeout(key, self.timeout if self.timeout is not None else 0.0, number)
            )
        return ColumnarAnswer(pa.nulls(len(listed), type=self.struct_type), errors)


def _check_length(answer: ColumnarAnswer, keys: pa.Array) -> None:
    if len(answer) != len(keys):
        raise TypeError(f"lookup_arrow answered {len(answer)} rows for {len(keys)} keys")
