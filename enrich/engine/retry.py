"""Retry strategies: a frozen policy plus a pure backoff computed from the attempt number.

A strategy holds no mutable state, so one instance is safely shared by every record of
every operator (Flink once shared a mutable delay across records: FLINK-33698).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

ResultPredicate = Callable[[Sequence[Any]], bool]
ExceptionPredicate = Callable[[BaseException], bool]


def is_retryable(exc: BaseException) -> bool:
    """The default exception predicate: retry only what may end differently next time.

    Every ``EnrichError`` carries ``retryable``: a timeout, a connection error, a 5xx or
    a 429/503 with ``Retry-After`` is worth another try; a ``DecodeError`` (a value that
    does not decode, a field that does not fit the schema), a ``SchemaError``, a 401 or
    another 4xx is final. Other exceptions (a user function's own) are retried unless
    they carry ``retryable = False`` themselves; ``BaseException``s (cancellation) never.
    """
    return bool(getattr(exc, "retryable", True)) and isinstance(exc, Exception)


def retry_on_empty(result: Sequence[Any]) -> bool:
    """A result predicate retrying records whose result is empty or a lookup miss (a
    left join's null row is a miss too)."""
    return len(result) == 0 or bool(getattr(result, "is_miss", False))


@dataclass(frozen=True)
class RetryStrategy:
    """Base of the retry strategies: when to try a record again, and after how long.

    ``max_attempts`` counts every call including the first (Flink's ``maxAttempts``
    counts only the retries): ``max_attempts=3`` means at most two retries.

    A record is retried when its call raised and ``retry_on_exception(exc)`` is true
    (default: :func:`is_retryable`), or when it returned and ``retry_on_result(outputs)``
    is true (default: never; :func:`retry_on_empty` retries misses). When the attempts
    are used up, the last outcome stands: the result is emitted, the error raised. A retry
    that would start after the record's total timeout is not made: the last outcome
    stands then too.
    """

    max_attempts: int
    retry_on_result: ResultPredicate | None = field(default=None, kw_only=True)
    retry_on_exception: ExceptionPredicate | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ValueError(f"max_attempts must be an int, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after call number ``attempt`` (1-based) before the next one."""
        raise NotImplementedError

    def retry_at(self, attempt: int, now: float, error: BaseException | None = None) -> float:
        """When call number ``attempt + 1`` starts, after call ``attempt`` ended at ``now``.

        That is ``now + delay(attempt)``, or later when ``error`` carries a longer
        ``retry_after`` hint in seconds (HTTP ``Retry-After`` on a 429 or 503): the
        server's word wins over the backoff, never the other way round.
        """
        delay = self.delay(attempt)
        hint = getattr(error, "retry_after", None)
        if isinstance(hint, (int, float)) and hint > delay:
            delay = float(hint)
        return now + delay

    @staticmethod
    def starts_in_time(when: float, deadline: float | None) -> bool:
        """Whether a retry starting at ``when`` is made for a record due at ``deadline``
        (None: no deadline). Only one that starts before the deadline is: a later one
        could only time out, so the last outcome stands instead."""
        return deadline is None or when < deadline

    def should_retry_result(self, outputs: Sequence[Any]) -> bool:
        return self.retry_on_result is not None and bool(self.retry_on_result(outputs))

    def should_retry_exception(self, exc: BaseException) -> bool:
        predicate = self.retry_on_exception or is_retryable
        return bool(predicate(exc))


@dataclass(frozen=True)
class FixedDelayRetry(RetryStrategy):
    """Retry after the same ``delay`` (seconds) every time."""

    delay_seconds: float = 0.0

    def __init__(
        self,
        max_attempts: int,
        delay: float,
        *,
        retry_on_result: ResultPredicate | None = None,
        retry_on_exception: ExceptionPredicate | None = None,
    ) -> None:
        object.__setattr__(self, "max_attempts", max_attempts)
        object.__setattr__(self, "delay_seconds", delay)
        object.__setattr__(self, "retry_on_result", retry_on_result)
        object.__setattr__(self, "retry_on_exception", retry_on_exception)
        self.__post_init__()
        _check_non_negative("delay", delay)

    def delay(self, attempt: int) -> float:
        return float(self.delay_seconds)


@dataclass(frozen=True)
class ExponentialBackoffRetry(RetryStrategy):
    """Retry after ``initial_delay * multiplier**(attempt-1)``, capped at ``max_delay``.

    With ``jitter`` (a fraction in [0, 1]) each delay is scaled by a random factor in
    ``[1 - jitter, 1 + jitter]`` drawn from ``rng`` (inject a seeded ``random.Random`` for
    reproducible runs), then capped again.
    """

    initial_delay: float = 0.0
    max_delay: float = 0.0
    multiplier: float = 2.0
    jitter: float = field(default=0.0, kw_only=True)
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __init__(
        self,
        max_attempts: int,
        initial_delay: float,
        max_delay: float,
        multiplier: float = 2.0,
        *,
        jitter: float = 0.0,
        rng: random.Random | None = None,
        retry_on_result: ResultPredicate | None = None,
        retry_on_exception: ExceptionPredicate | None = None,
    ) -> None:
        for name, value in (
            ("max_attempts", max_attempts),
            ("initial_delay", initial_delay),
            ("max_delay", max_delay),
            ("multiplier", multiplier),
            ("jitter", jitter),
            ("rng", rng),
            ("retry_on_result", retry_on_result),
            ("retry_on_exception", retry_on_exception),
        ):
            object.__setattr__(self, name, value)
        self.__post_init__()
        _check_non_negative("initial_delay", initial_delay)
        _check_non_negative("max_delay", max_delay)
        if max_delay < initial_delay:
            raise ValueError(
                f"max_delay must be >= initial_delay, got max_delay={max_delay} "
                f"and initial_delay={initial_delay}"
            )
        if not multiplier >= 1.0:
            raise ValueError(f"multiplier must be >= 1, got {multiplier}")
        if not 0.0 <= jitter <= 1.0:
            raise ValueError(f"jitter must be within [0, 1], got {jitter}")

    def delay(self, attempt: int) -> float:
        exponent = max(attempt - 1, 0)
        try:
            base = self.initial_delay * self.multiplier**exponent
        except OverflowError:
            base = self.max_delay
        base = min(base, self.max_delay)
        if self.jitter:
            rng = self.rng or random
            base *= 1.0 + self.jitter * (2.0 * rng.random() - 1.0)
        return min(max(base, 0.0), self.max_delay)


def _check_non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
