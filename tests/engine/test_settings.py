"""Settings are validated on construction; the error names the field and the value."""

from __future__ import annotations

import random

import pytest

import enrich
from enrich import ExponentialBackoffRetry, FixedDelayRetry, ordered_wait
from enrich.testing import FakeFunction


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": 0}, "capacity must be an int >= 1, got 0"),
        ({"capacity": 2.5}, "capacity must be an int >= 1, got 2.5"),
        ({"capacity": True}, "capacity must be an int >= 1, got True"),
        ({"timeout": 0}, "timeout must be a number > 0 or None, got 0"),
        ({"timeout": -1.0}, "timeout must be a number > 0 or None, got -1.0"),
        ({"retry": 3}, "retry must be a RetryStrategy or None, got 3"),
    ],
)
def test_operator_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ordered_wait([1], FakeFunction(), **kwargs)  # type: ignore[arg-type]


def test_a_function_that_is_not_async_is_refused() -> None:
    with pytest.raises(TypeError, match="AsyncFunction or an async function"):
        ordered_wait([1], lambda v: [v])


def test_an_async_function_without_invoke_is_refused() -> None:
    class Empty(enrich.AsyncFunction):
        pass

    with pytest.raises(TypeError, match="must implement invoke"):
        list(ordered_wait([1], Empty()))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: FixedDelayRetry(0, 1.0), "max_attempts must be >= 1, got 0"),
        (lambda: FixedDelayRetry(2, -1.0), "delay must be a number >= 0, got -1.0"),
        (lambda: ExponentialBackoffRetry(3, 1.0, 0.5), "max_delay must be >= initial_delay"),
        (lambda: ExponentialBackoffRetry(3, 0.1, 1.0, 0.5), "multiplier must be >= 1, got 0.5"),
        (lambda: ExponentialBackoffRetry(3, 0.1, 1.0, jitter=2), "jitter must be within"),
    ],
)
def test_retry_settings(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_backoff_is_a_pure_function_of_the_attempt() -> None:
    retry = ExponentialBackoffRetry(6, initial_delay=0.1, max_delay=1.0, multiplier=3.0)
    assert [retry.delay(n) for n in range(1, 6)] == pytest.approx([0.1, 0.3, 0.9, 1.0, 1.0])
    assert retry.delay(3) == retry.delay(3)
    assert FixedDelayRetry(3, 0.2).delay(1) == FixedDelayRetry(3, 0.2).delay(2) == 0.2
    huge = ExponentialBackoffRetry(10**6, 1.0, 5.0, 10.0)
    assert huge.delay(10**5) == 5.0


def test_jitter_draws_from_the_injected_random() -> None:
    def delays(seed: int) -> list[float]:
        retry = ExponentialBackoffRetry(5, 1.0, 10.0, 2.0, jitter=0.5, rng=random.Random(seed))
        return [retry.delay(n) for n in range(1, 5)]

    assert delays(7) == delays(7)
    assert delays(7) != delays(8)
    for n, value in enumerate(delays(7), start=1):
        base = min(2.0 ** (n - 1), 10.0)
        assert base * 0.5 <= value <= min(base * 1.5, 10.0)


def test_output_mode_parsing() -> None:
    assert enrich.OutputMode.of("ORDERED") is enrich.OutputMode.ORDERED
    assert enrich.OutputMode.of(enrich.OutputMode.UNORDERED) is enrich.OutputMode.UNORDERED
    with pytest.raises(ValueError, match="mode must be 'ordered' or 'unordered', got 'sorted'"):
        enrich.OutputMode.of("sorted")
