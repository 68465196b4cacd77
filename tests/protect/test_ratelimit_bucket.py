"""The job rate limit's local fallback bucket and its settings."""

from __future__ import annotations

import pytest

from enrich.protect import JobRateLimit
from enrich.protect.bucket import TokenBucket


def test_a_burst_is_free_then_a_take_waits_and_takes_nothing() -> None:
    bucket = TokenBucket(rate=10.0, burst=2.0)
    assert bucket.take(1, now=0.0) == 0.0
    assert bucket.take(1, now=0.0) == 0.0
    assert bucket.take(1, now=0.0) == pytest.approx(0.1)
    # Told to wait, the caller took nothing: asking again at once gets the same answer,
    # however many callers ask (no permit is granted ahead of time).
    assert bucket.take(1, now=0.0) == pytest.approx(0.1)
    assert bucket.take(2, now=0.05) == pytest.approx(0.15)
    assert bucket.take(1, now=0.1) == 0.0
    assert bucket.take(1, now=1.0) == 0.0  # refilled, up to the burst only
    assert bucket.take(2, now=1.0) == pytest.approx(0.1)


def test_a_take_above_the_burst_is_refused() -> None:
    bucket = TokenBucket(rate=10.0, burst=2.0)
    with pytest.raises(ValueError, match=r"permits must be in \[1, burst=2\], got 3"):
        bucket.take(3, now=0.0)
    with pytest.raises(ValueError, match="burst >= 1"):
        TokenBucket(rate=10.0, burst=0.5)


def test_the_rate_holds_over_every_interval_however_much_is_wanted() -> None:
    bucket = TokenBucket(rate=100.0, burst=5.0)
    now, granted = 0.0, []
    while len(granted) < 1000:  # a crowd wanting 1000 permits: the caller loops
        wait = bucket.take(5, now)
        if wait:
            now += wait
        else:
            granted.extend([now] * 5)
    for start in granted:  # every interval [start, start + t]: burst + rate * t at most
        for t in (0.0, 0.05, 0.5, 1.0):
            inside = sum(1 for at in granted if start <= at <= start + t)
            assert inside <= 5 + 100 * t + 1e-9


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"rate": 0}, "rate must be a finite number > 0, got 0"),
        ({"rate": 5, "redis_url": "http://x"}, "redis_url must be a redis://"),
        ({"rate": 5, "key": ""}, "key must be a non-empty str or None, got ''"),
        ({"rate": 5, "fallback_rate": -1}, "fallback_rate must be a finite number > 0"),
    ],
)
def test_settings_name_the_bad_value(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        JobRateLimit(**settings)  # type: ignore[arg-type]


def test_settings_keep_the_password_out_of_sight() -> None:
    limit = JobRateLimit(rate=5, redis_url="redis://user:s3cret@host:6379/0")
    shown = repr(limit) + limit.described()
    assert "s3cret" not in shown
    assert "user" in limit.described()


def test_a_store_names_its_bucket_and_defaults() -> None:
    made = JobRateLimit.of(100, name="job_rate_limit")
    assert made is not None
    a = made.for_store("redis x", "redis://h:1/0")
    b = made.for_store("redis y", "redis://h:1/0")
    assert a.key != b.key and a.key is not None and a.key.startswith("enrich:rate:")
    assert a.per_process_fallback == 100 / 8
    assert a.batch == 1
    with pytest.raises(ValueError, match="needs a Redis for its shared bucket"):
        made.for_store("http x", None)
    with pytest.raises(ValueError, match="job_rate_limit must be a number"):
        JobRateLimit.of("fast", name="job_rate_limit")  # type: ignore[arg-type]
