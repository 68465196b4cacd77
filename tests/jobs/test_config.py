"""Job configs become library objects; mistakes are named, secrets come from the env."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import enrich
from connectors.http import HttpLookup
from connectors.redis import RedisLookup
from jobs import _config
from jobs.sql_job import statements

CONFIG: dict[str, Any] = {
    "source": {
        "format": "files",
        "path": "/in",
        "schema": "order_id long, user_id long",
        "select": ["order_id", "user_id"],
    },
    "stores": {
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
            "check_key": 7,
        },
    },
    "joins": [
        {
            "store": "users",
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
        {"store": "credit", "on": "user_id", "prefix": "c_", "on_error": "fail"},
    ],
    "lookups": {"dim_user": {"store": "users", "timeout": 2.0}},
    "dead_letter": {"format": "files", "file_format": "json", "path": "/failed"},
    "sink": {"format": "files", "path": "/out"},
    "checkpoint": "/checkpoints/job",
    "trigger": "10 seconds",
}


def write(tmp_path: Path, config: object, name: str = "job.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def test_a_config_becomes_stores_settings_and_endpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_REDIS_PASSWORD", "s3cret-pw")
    config = _config.load(write(tmp_path, CONFIG))
    users = config.stores["users"]
    assert isinstance(users, RedisLookup)
    assert isinstance(config.stores["credit"], HttpLookup)
    assert "s3cret-pw" not in repr(users)
    first, second = config.joins
    assert first["source"] is users
    assert first["cache"] == enrich.LookupCache(max_rows=10, ttl=5)
    assert first["on_error"] == "dead_letter"  # the default when a dead_letter exists
    assert second["on_error"] == "fail"
    retry = first["retry"]
    assert isinstance(retry, enrich.ExponentialBackoffRetry)
    assert retry.retry_on_result is enrich.retry_on_empty
    assert config.lookups["dim_user"]["source"] is users
    assert config.source is not None and config.source.format == "json"  # files: JSON
    assert config.source.select == ("order_id", "user_id")
    assert config.sink is not None and (config.sink.format, config.sink.path) == (
        "parquet",
        "/out",
    )
    assert config.dead_letter is not None and config.dead_letter.format == "json"
    assert (config.checkpoint, config.trigger) == ("/checkpoints/job", "10 seconds")
    assert config.check_keys == {"users": 0, "credit": 7}


def test_yaml_and_toml_read_the_same_job(tmp_path: Path) -> None:
    yaml_text = """
source: {format: rate, options: {rowsPerSecond: 5, includeTimestamp: true}}
stores:
  users: {kind: redis, url: "redis://h:1/0", key_template: "user:{}", value: json,
          schema: "name string"}
joins:
  - {store: users, on: user_id, how: inner}
sink: {format: memory, name: out}
"""
    toml_text = """
[source]
format = "rate"
options = { rowsPerSecond = 5, includeTimestamp = true }
[stores.users]
kind = "redis"
url = "redis://h:1/0"
key_template = "user:{}"
value = "json"
schema = "name string"
[[joins]]
store = "users"
on = "user_id"
how = "inner"
[sink]
format = "memory"
name = "out"
"""
    (tmp_path / "job.yaml").write_text(yaml_text)
    (tmp_path / "job.toml").write_text(toml_text)
    from_yaml = _config.load(tmp_path / "job.yaml")
    from_toml = _config.load(tmp_path / "job.toml")
    assert from_yaml == from_toml
    # YAML 1.1 would read the key `on` as True; options become Spark's strings.
    assert from_yaml.joins[0]["on"] == "user_id"
    assert from_yaml.source is not None
    assert from_yaml.source.options == {"rowsPerSecond": "5", "includeTimestamp": "true"}


def test_secrets_come_from_files_and_defaults_from_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text("fr0m-a-file\n")
    monkeypatch.delenv("UNSET_FOR_TEST", raising=False)
    raw = json.loads(json.dumps(CONFIG))
    raw["stores"]["users"]["url"] = f"redis://:${{file:{secret}}}@dim:6379/0"
    raw["stores"]["credit"]["url_template"] = "${UNSET_FOR_TEST:-http://fallback:1}/users/{}"
    config = _config.load(write(tmp_path, raw))
    assert "fr0m-a-file" not in repr(config.stores["users"])
    assert "fallback:1" in repr(config.stores["credit"])
    raw["stores"]["users"]["url"] = "redis://:${file:/no/such/secret}@dim/0"
    with pytest.raises(_config.ConfigError, match=r"stores\.users\.url uses \$\{file:/no/such"):
        _config.load(write(tmp_path, raw))


def test_a_missing_environment_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        _config.ConfigError, match=r"stores\.users\.url uses \$\{TEST_REDIS_PASSWORD\}"
    ):
        _config.load(write(tmp_path, CONFIG))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["joins"][0].update(store="nope"), r"joins\[0\]\.store must name one of"),
        (
            lambda c: c["joins"][0].update(howw="left"),
            r"joins\[0\]: unknown setting\(s\) \['howw'\]",
        ),
        (lambda c: c["joins"][0].update(how="outer"), r"joins\[0\]: how must be one of"),
        (
            lambda c: c["joins"][0].update(capacity=0),
            r"joins\[0\]: capacity must be an int >= 1, got 0",
        ),
        (lambda c: c["joins"][0].update(mode="random"), r"mode must be 'ordered' or"),
        (lambda c: c["stores"]["credit"].update(kind="ftp"), "kind must be 'redis' or 'http'"),
        (lambda c: c["stores"]["credit"].update(colour=1), r"credit: unknown setting 'colour'"),
        (lambda c: c["stores"]["credit"].pop("url_template"), "needs 'url_template'"),
        (lambda c: c["joins"][0]["cache"].update(ttl=-1), r"joins\[0\]: ttl must be a number > 0"),
        (
            lambda c: c.pop("stores"),
            r"joins\[0\]\.store is 'users', but the config has no 'stores'",
        ),
        (lambda c: c.update(sinks={}), r"unknown section\(s\) \['sinks'\]"),
        (lambda c: c["source"].pop("schema"), r"source: format 'files' needs 'schema'"),
        (lambda c: c["sink"].update(format="memory"), r"sink: format 'memory' needs 'name'"),
        (lambda c: c["sink"].update(options={"a": [1]}), r"sink\.options\.a must be a string"),
        (lambda c: c.update(trigger="sometimes"), r"trigger must be one of"),
        (
            lambda c: c.pop("dead_letter"),
            r"joins\[0\]\.on_error is 'dead_letter' but the job has no dead_letter",
        ),
    ],
)
def test_mistakes_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, message: str
) -> None:
    monkeypatch.setenv("TEST_REDIS_PASSWORD", "pw")
    config = json.loads(json.dumps(CONFIG))
    if "dead_letter" in message:
        config["joins"][0]["on_error"] = "dead_letter"
    change(config)
    with pytest.raises(_config.ConfigError, match=message):
        _config.load(write(tmp_path, config))


def test_older_section_names_still_read(tmp_path: Path) -> None:
    raw = {
        "sources": {
            "users": {
                "kind": "redis",
                "url": "redis://h:1/0",
                "key_template": "u:{}",
                "value": "json",
                "schema": "n string",
            }
        },
        "input": {"format": "json", "path": "/in", "streaming": False},
        "joins": [{"source": "users", "on": "id"}],
        "output": {"format": "parquet", "path": "/out", "mode": "overwrite"},
    }
    config = _config.load(write(tmp_path, raw))
    assert config.joins[0]["source"] is config.stores["users"]
    assert config.source is not None and not config.source.streaming
    assert config.sink is not None and config.sink.mode == "overwrite"


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(_config.ConfigError, match="cannot read the config"):
        _config.load(tmp_path / "absent.json")
    for name, text, message in [
        ("bad.json", "{nope", "not valid JSON"),
        ("bad.yaml", "a: [1", "not valid YAML"),
        ("bad.toml", "a = ", "not valid TOML"),
        ("list.yaml", "- 1", "must be a mapping"),
        ("job.ini", "[a]", "unknown config format '.ini'"),
    ]:
        (tmp_path / name).write_text(text)
        with pytest.raises(_config.ConfigError, match=message):
            _config.load(tmp_path / name)


def test_sql_statements_are_split_and_comments_dropped() -> None:
    text = "-- enrich orders\nSELECT 1;\n\n  -- nothing\nSELECT dim_user(a) AS u FROM input ;\n"
    assert statements(text) == ["SELECT 1", "SELECT dim_user(a) AS u FROM input"]


LOW_LATENCY: dict[str, Any] = {
    "source": {"format": "redis-stream", "schema": "stream_id string, user_id long",
               "options": {"url": "redis://h:6379", "stream": "orders"}},
    "stores": {"users": CONFIG["stores"]["users"]},
    "joins": [{"store": "users", "on": "user_id"}],
    "sink": {"format": "redis", "options": {"url": "redis://h:6379", "stream": "out"}},
    "checkpoint": "/chk",
    "latency": "low",
}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: None, None),
        (lambda c: c.update(trigger="1 second"), None),
        (lambda c: c.update(latency="lowest"),
         r"latency must be one of default, low, got 'lowest' \(did you mean 'low'\?\)"),
        (lambda c: c["source"].update(format="rate", options={}, schema=None),
         "latency: low: the source must be a streaming redis-stream"),
        (lambda c: c["sink"].update(format="console", options={}),
         "latency: low: the sink must be the redis sink"),
        (lambda c: c.update(trigger="availableNow"),
         "latency: low: Spark's async progress tracking takes interval triggers only"),
        (lambda c: c["source"].update(select=["user_id"]),
         "latency: low: source.select must keep stream_id"),
        (lambda c: c.update(dead_letter={"format": "console"}),
         "latency: low: a dead_letter writes both sinks per micro-batch"),
    ],
)  # fmt: skip
def test_the_low_latency_switch_is_checked_where_the_config_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, message: str | None
) -> None:
    monkeypatch.setenv("TEST_REDIS_PASSWORD", "pw")
    config = json.loads(json.dumps(LOW_LATENCY))
    change(config)
    if message is None:
        assert _config.load(write(tmp_path, config)).latency == "low"
        return
    with pytest.raises(_config.ConfigError, match=message):
        _config.load(write(tmp_path, config))


KAFKA_SINK = {"format": "kafka", "exactly_once": True,
              "options": {"kafka.bootstrap.servers": "k:9092", "topic": "out"}}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: None, None),
        (lambda c: c["sink"].update(format="kafka-eos", exactly_once=False), None),
        (lambda c: c["sink"].update(format="parquet"),
         "sink: exactly_once is for format kafka"),
        (lambda c: c["sink"].update(exactly_once="yes"),
         "sink.exactly_once must be true or false"),
        (lambda c: c.update(latency="low", trigger="availableNow"),
         "latency: low: async progress tracking takes interval triggers only"),
        (lambda c: c["source"].update(format="rate", options={}, schema=None),
         "latency: low: the kafka-eos sink needs a streaming kafka or redis-stream source"),
    ],
)  # fmt: skip
def test_an_exactly_once_kafka_sink_is_the_kafka_eos_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, message: str | None
) -> None:
    monkeypatch.setenv("TEST_REDIS_PASSWORD", "pw")
    config = json.loads(json.dumps({**LOW_LATENCY, "sink": KAFKA_SINK}))
    change(config)
    if message is None:
        loaded = _config.load(write(tmp_path, config))
        assert loaded.sink is not None and loaded.sink.format == "kafka-eos"
        return
    with pytest.raises(_config.ConfigError, match=message):
        _config.load(write(tmp_path, config))
