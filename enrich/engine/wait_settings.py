"""The operator's settings (the checks they use live in :mod:`.checks`).

A setting is checked once, where its settings object is built; the error is a
``ValueError`` that names the setting and shows the bad value
(``"capacity must be an int >= 1, got 0"``). Downstream code receives the object whole and
never checks again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .checks import (
    check_choice as check_choice,
    check_instance as check_instance,
    check_int as check_int,
    check_non_negative as check_non_negative,
    check_seconds as check_seconds,
    short as short,
)
from .model import OutputMode
from .retry import RetryStrategy

DEFAULT_TIMEOUT = 10.0
DEFAULT_CAPACITY = 100
# How long a record waits at most for its batch to fill (batched calls only): short
# beside a remote call, long beside the admission of a chunk of records.
DEFAULT_BATCH_WAIT = 0.01


def check_mode(value: Any) -> OutputMode:
    """``value`` as an :class:`OutputMode` (an enum member, "ordered" or "unordered")."""
    if not isinstance(value, (OutputMode, str)):
        raise ValueError(f"mode must be 'ordered' or 'unordered', got {short(value)}")
    return OutputMode.of(value)


@dataclass(frozen=True)
class WaitSettings:
    """How an operator runs: built (and validated) once by ``ordered_wait`` and friends.

    Attributes:
        mode: ORDERED or UNORDERED (a string is accepted and converted).
        capacity: records in flight at most (an int >= 1).
        timeout: seconds from a record's first call to its final completion, retries
            included; None for none.
        retry: a :class:`~enrich.RetryStrategy`, or None.
        batch_size: records per call of a batch function (``async_invoke_many``) at
            most; 1 starts each record's call as it is admitted.
        batch_wait: seconds a record waits at most for its batch to fill (``batch_size``
            > 1 only; none once the input has ended).

    Raises:
        ValueError: a setting is out of range; the message names it and its value.
    """

    mode: OutputMode = OutputMode.ORDERED
    capacity: int = DEFAULT_CAPACITY
    timeout: float | None = DEFAULT_TIMEOUT
    retry: RetryStrategy | None = None
    batch_size: int = 1
    batch_wait: float = DEFAULT_BATCH_WAIT

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", check_mode(self.mode))
        check_int("capacity", self.capacity)
        check_seconds("timeout", self.timeout)
        check_instance("retry", self.retry, RetryStrategy, "a RetryStrategy")
        check_int("batch_size", self.batch_size)
        object.__setattr__(
            self, "batch_wait", check_non_negative("batch_wait", self.batch_wait, "seconds")
        )
