"""Retry timing lives in the strategy: the delay, the retry_after hint, the deadline."""

from __future__ import annotations

import enrich


def test_retry_at_is_the_backoff_after_the_attempt() -> None:
    retry = enrich.ExponentialBackoffRetry(5, 0.1, 1.0, 2.0)
    assert retry.retry_at(1, 10.0) == 10.1
    assert retry.retry_at(3, 10.0) == 10.0 + 0.4


def test_a_longer_retry_after_hint_wins_a_shorter_one_does_not() -> None:
    retry = enrich.FixedDelayRetry(3, 0.5)
    slow = enrich.LookupFailed("503", kind="status:503", retry_after=2.0)
    quick = enrich.LookupFailed("503", kind="status:503", retry_after=0.1)
    assert retry.retry_at(1, 0.0, slow) == 2.0
    assert retry.retry_at(1, 0.0, quick) == 0.5
    assert retry.retry_at(1, 0.0, ValueError("no hint")) == 0.5


def test_a_retry_is_made_only_if_it_starts_before_the_deadline() -> None:
    starts_in_time = enrich.RetryStrategy.starts_in_time
    assert starts_in_time(0.9, 1.0)
    assert not starts_in_time(1.0, 1.0)  # it could only time out
    assert starts_in_time(1e9, None)
