"""Job configs become library objects; mistakes are named, secrets come from the env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import enrich
from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from jobs import _config
from jobs.sql_job import statements

CONFIG = {
    "sources": {
        "users": {
            "kind": "redis",
            "url": "redis://:${TEST_REDIS_PASSWORD}@dim:6379/0",
            "key_template": "user:{}",
            "value": "json",
            "schema": "name string, tier string",
        },
        "credit": {
            "kind": "http",
            "url_template": "http://svc/users/{}",
            "schema": "credit double",
        },
    },
    "input": {"format": "json", "path": "/in"},
    "joins": [
        {
            "source": "users",
            "on": "user_id",
            "cache": {"max_rows": 10, "ttl": 5},
            "retry": {
                "kind": "exponential",
                "max_attempts": 3,
                "initial_delay": 0.1,
                "max_delay": 1.0,
                "on_miss": True,
            },
        },
        {"source": "credit", "on": "user_id", "prefix": "c_"},
    ],
    "lookups": {"dim_user": {"source": "users", "timeout": 2.0}},
    "output": {"format": "parquet", "path": "/out"},
}


def write(tmp_path: Path, config: object) -> Path:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))
    return path


def test_a_config_becomes_sources_and_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_REDIS_PASSWORD", "s3cret-pw")
    config = _config.load(write(tmp_path, CONFIG))
    users = config.sources["users"]
    assert isinstance(users, RedisLookup)
    assert isinstance(config.sources["credit"], HttpLookup)
    assert "s3cret-pw" not in repr(users)
    first, second = config.joins
    assert first["source"] is users
    assert first["cache"] == enrich.LookupCache(max_rows=10, ttl=5)
    retry = first["retry"]
    assert isinstance(retry, enrich.ExponentialBackoffRetry)
    assert retry.retry_on_result is enrich.retry_on_empty
    assert second["prefix"] == "c_"
    assert config.lookups["dim_user"]["source"] is users


def test_a_missing_environment_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        _config.ConfigError, match=r"sources\.users\.url uses \$\{TEST_REDIS_PASSWORD\}"
    ):
        _config.load(write(tmp_path, CONFIG))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["joins"][0].update(source="nope"), r"joins\[0\]\.source must name one of"),
        (
            lambda c: c["joins"][0].update(howw="left"),
            r"joins\[0\]: unknown setting\(s\) \['howw'\]",
        ),
        (lambda c: c["sources"]["credit"].update(kind="ftp"), "kind must be 'redis' or 'http'"),
        (lambda c: c["sources"]["credit"].pop("url_template"), "needs 'url_template'"),
        (lambda c: c["joins"][0]["cache"].update(ttl=-1), r"joins\[0\]: ttl must be a number > 0"),
        (lambda c: c.pop("sources"), "needs a 'sources' section"),
    ],
)
def test_mistakes_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: object, message: str
) -> None:
    monkeypatch.setenv("TEST_REDIS_PASSWORD", "pw")
    config = json.loads(json.dumps(CONFIG))
    change(config)  # type: ignore[operator]
    with pytest.raises(_config.ConfigError, match=message):
        _config.load(write(tmp_path, config))


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(_config.ConfigError, match="cannot read the config"):
        _config.load(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(_config.ConfigError, match="not valid JSON"):
        _config.load(bad)


def test_sql_statements_are_split_and_comments_dropped() -> None:
    text = "-- enrich orders\nSELECT 1;\n\n  -- nothing\nSELECT dim_user(a) AS u FROM input ;\n"
    assert statements(text) == ["SELECT 1", "SELECT dim_user(a) AS u FROM input"]
