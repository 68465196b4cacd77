"""The operator's settings, and the validators every settings object of the library uses.

A setting is checked once, where its settings object is built; the error is a
``ValueError`` that names the setting and shows the bad value
(``"capacity must be an int >= 1, got 0"``). Downstream code receives the object whole and
never checks again.
"""

from __future__ import annotations

import reprlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from .model import OutputMode
from .retry import RetryStrategy

DEFAULT_TIMEOUT = 10.0
DEFAULT_CAPACITY = 100

_shorten = reprlib.Repr()
_shorten.maxstring = 60
_shorten.maxother = 60


def shown(value: Any) -> str:
    """A short ``repr`` of a value for an error message (long values are cut)."""
    return _shorten.repr(value)


def check_int(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` if it is an int (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {shown(value)}")
    return value


def check_seconds(name: str, value: Any) -> float | None:
    """``value`` if it is a number of seconds > 0, or None (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a number > 0 or None, got {shown(value)}")
    return value


def check_choice(name: str, value: Any, choices: Collection[str]) -> str:
    """``value`` if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {shown(value)}")
    return value


def check_instance(name: str, value: Any, kind: type, what: str) -> Any:
    """``value`` if it is None or an instance of ``kind`` (``what`` names the kind)."""
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"{name} must be {what} or None, got {shown(value)}")
    return value


def check_mode(value: Any) -> OutputMode:
    """``value`` as an :class:`OutputMode` (an enum member, "ordered" or "unordered")."""
    if not isinstance(value, (OutputMode, str)):
        raise ValueError(f"mode must be 'ordered' or 'unordered', got {shown(value)}")
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

    Raises:
        ValueError: a setting is out of range; the message names it and its value.
    """

    mode: OutputMode = OutputMode.ORDERED
    capacity: int = DEFAULT_CAPACITY
    timeout: float | None = DEFAULT_TIMEOUT
    retry: RetryStrategy | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", check_mode(self.mode))
        check_int("capacity", self.capacity)
        check_seconds("timeout", self.timeout)
        check_instance("retry", self.retry, RetryStrategy, "a RetryStrategy")
