"""The one copy of the library's argument checks.

Every settings object of the library (the operator's, the join's, the cache, the
connectors') checks its arguments with these, once, where it is built: the error is a
``ValueError`` naming the setting and showing the bad value, shortened by :func:`short`
(``"capacity must be an int >= 1, got 0"``). Messages show a value as the error tree's
:func:`~enrich._errors.short` does, never more than a few dozen characters of it, so a
huge key or document cannot flood a log.

This module imports only the error tree's floor (:mod:`enrich._errors`, which imports
nothing of the library), so that every layer may use it.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from .._errors import short as short

__all__ = (
    "check_choice",
    "check_instance",
    "check_int",
    "check_positive",
    "check_seconds",
    "short",
)


def check_int(name: str, value: Any, minimum: int = 1, *, rule: str | None = None) -> int:
    """``value`` if it is an int (not a bool) of at least ``minimum``.

    ``rule`` words the bound in the message (default ``">= minimum"``).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int {rule or f'>= {minimum}'}, got {short(value)}")
    return value


def check_seconds(name: str, value: Any) -> float | None:
    """``value`` if it is a number of seconds > 0, or None (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a number > 0 or None, got {short(value)}")
    return value


def check_positive(name: str, value: Any, what: str = "a finite number") -> float:
    """``value`` as a float if it is a finite number > 0 (not a bool, not None).

    ``what`` names the kind of number in the message (``"a number of seconds"``).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be {what} > 0, got {short(value)}")
    return float(value)


def check_non_negative(name: str, value: Any, what: str = "a finite number") -> float:
    """``value`` as a float if it is a finite number >= 0 (not a bool, not None)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be {what} >= 0, got {short(value)}")
    return float(value)


def check_choice(name: str, value: Any, choices: Collection[str]) -> str:
    """``value`` if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {short(value)}")
    return value


def check_instance(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it is None or an instance of ``kind`` (``what`` names the kind)."""
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"{name} must be {what} or None, got {short(value)}")
    return value
