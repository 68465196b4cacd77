"""Job configs carry a store's job-wide rate limit and adaptive concurrency."""

from __future__ import annotations

import pytest

from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from enrich.protect import JobRateLimit
from jobs import _lookups
from jobs._files import ConfigError


def test_a_store_takes_a_job_rate_limit_and_auto_concurrency() -> None:
    http = _lookups.store(
        {
            "kind": "http",
            "url_template": "http://svc/users/{}",
            "schema": "name string",
            "concurrency": "auto",
            "job_rate_limit": {"rate": 1000, "redis_url": "redis://limits:6379/0"},
        },
        "stores.users",
    )
    redis = _lookups.store(
        {
            "kind": "redis",
            "url": "redis://dim:6379/0",
            "key_template": "user:{}",
            "value": "json",
            "schema": "name string",
            "job_rate_limit": 5000,
        },
        "stores.dim",
    )

    assert isinstance(http, HttpLookup) and isinstance(redis, RedisLookup)
    assert "job_rate_limit=JobRateLimit(rate=1000, redis_url='redis://limits:6379/0'" in repr(http)
    assert "concurrency='auto'" in repr(http)
    assert "job_rate_limit=JobRateLimit(rate=5000" in repr(redis)
    assert http == _lookups.store(
        {
            "kind": "http",
            "url_template": "http://svc/users/{}",
            "schema": "name string",
            "concurrency": "auto",
            "job_rate_limit": JobRateLimit(rate=1000, redis_url="redis://limits:6379/0"),
        },
        "stores.users",
    )


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"concurrency": "fast"}, "concurrency must be one of ('fixed', 'auto'), got 'fast'"),
        ({"job_rate_limit": 100}, "job_rate_limit needs a Redis for its shared bucket"),
        ({"job_rate_limit": {"rate": 0, "redis_url": "redis://r"}}, "rate must be a finite"),
    ],
)
def test_a_bad_limit_is_named(limits: dict[str, object], message: str) -> None:
    spec = {"kind": "http", "url_template": "http://svc/u/{}", "schema": "a string", **limits}
    with pytest.raises(ConfigError) as caught:
        _lookups.store(spec, "stores.svc")
    assert str(caught.value).startswith("stores.svc: " + message)
