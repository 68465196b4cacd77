"""Small value types of the engine: output modes, watermarks, statistics."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class OutputMode(enum.Enum):
    """How an operator orders its outputs.

    ORDERED emits in input order; UNORDERED emits as records complete, but never moves
    a record across a :class:`Watermark`.
    """

    ORDERED = "ordered"
    UNORDERED = "unordered"

    @classmethod
    def of(cls, mode: OutputMode | str) -> OutputMode:
        if isinstance(mode, OutputMode):
            return mode
        try:
            return cls(str(mode).lower())
        except ValueError:
            raise ValueError(f"mode must be 'ordered' or 'unordered', got {mode!r}") from None


@dataclass(frozen=True)
class Watermark:
    """An event-time marker among the inputs; passed through to the outputs in place."""

    timestamp: Any


@dataclass(frozen=True)
class OperatorStatistics:
    """A snapshot of an operator's counters.

    Attributes:
        in_flight: records admitted and not yet emitted.
        peak_in_flight: the most records ever in flight at once (never above capacity).
        completed: records that completed with outputs (a timeout fallback, or an error
            turned into outputs by ``handle_error``, included).
        timeouts: records that ran out of their total timeout.
        retries: calls made again after a failed or rejected attempt.
        errors: records whose final outcome was an error (a timeout that raised
            included), whether ``handle_error`` then recovered them or not.
    """

    in_flight: int = 0
    peak_in_flight: int = 0
    completed: int = 0
    timeouts: int = 0
    retries: int = 0
    errors: int = 0
