"""Construction: validation of every setting, repr masking, keys, public API (no server)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import connectors.redis
from connectors.redis import RedisLookup
from connectors.redis.codec import Command, pack
from connectors.redis.config import KeyTemplate

URL = "redis://127.0.0.1:6390/0"
GOOD: dict[str, Any] = {"key_template": "k:{}", "value": "json", "schema": "a int, b string"}


def test_public_api_is_only_redis_lookup() -> None:
    assert connectors.redis.__all__ == ("RedisLookup",)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_batch": 0}, "max_batch must be an int >= 1, got 0"),
        ({"max_batch": True}, "max_batch must be an int >= 1, got True"),
        ({"pool_size": -1}, "pool_size must be an int >= 1, got -1"),
        ({"timeout": 0}, "timeout must be a number of seconds > 0, got 0"),
        ({"timeout": float("inf")}, "timeout must be a number of seconds > 0, got inf"),
        ({"value": "xml"}, "value must be one of 'json', 'string', 'hash', got 'xml'"),
        ({"value": "string"}, "value='string' needs a schema of exactly one field, got 2"),
        ({"key_template": "k"}, "key_template needs at least one '{}' placeholder: 'k'"),
        ({"key_template": "k:{id}"}, "key_template may only use empty '{}' placeholders"),
        ({"key_template": "k:{:>5}"}, "key_template may only use empty '{}' placeholders"),
        ({"key_template": "k:{"}, "key_template does not parse: 'k:{'"),
        ({"key_encoding": "nope"}, "key_encoding is not a known codec: 'nope'"),
        ({"fields": ["a"]}, "fields is only for value='hash'"),
        ({"value": "hash", "fields": "a"}, "fields must be a list of field names, got 'a'"),
        ({"value": "hash", "fields": ["zz"]}, "fields names 'zz', which is not in the schema"),
        ({"value": "hash", "fields": []}, "fields must name at least one field"),
        ({"cluster": "yes"}, "cluster must be a bool, got 'yes'"),
    ],
)
def test_bad_settings_name_field_and_value(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        RedisLookup(URL, **{**GOOD, **changes})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:6390", r"url must start with redis://, rediss:// or redis\+sentinel"),
        ("redis://", "url must name a host"),
        ("redis://h:notaport", "url has a bad host or port"),
        ("redis://h:6390/x", "url path must be a database number"),
        ("redis://h:6390/0?socket_timeout=3", "query parameter 'socket_timeout' is not supported"),
        ("redis://h:6390/0#frag", "must not have a fragment"),
        ("redis+sentinel://h:26379", "url must name the master after the sentinels"),
        ("redis+sentinel://h:26379,:1/m", "url must name a host"),
        ("redis+sentinel://h:26379/m/x", "url path must be a database number"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RedisLookup(url, **GOOD)


def test_cluster_needs_db_zero() -> None:
    with pytest.raises(ValueError, match="database 0 with cluster=True"):
        RedisLookup("redis://h:7000/3", cluster=True, **GOOD)


def test_password_never_shows_in_validation_errors() -> None:
    with pytest.raises(ValueError) as in_url:
        RedisLookup("redis://u:pa55w0rd@h:6390/x", **GOOD)
    with pytest.raises(ValueError) as twice:
        RedisLookup("redis://u:pa55w0rd@h:6390/0", password="0ther-pa55", **GOOD)
    assert "pa55w0rd" not in str(in_url.value)
    assert "pa55w0rd" not in str(twice.value) and "0ther-pa55" not in str(twice.value)
    assert "u:***@h" in str(in_url.value)


def test_repr_masks_password_and_shows_settings() -> None:
    source = RedisLookup(
        "rediss://user:s3cr%40t@cache.example:6390/2",
        key_template="user:{}",
        value="hash",
        schema="a int, b string",
        fields={"a": "x"},
        max_batch=10,
    )
    text = repr(source)
    assert text == (
        "RedisLookup('rediss://user:***@cache.example:6390/2', key_template='user:{}', "
        "value='hash', schema=Schema('a int, b string'), fields={'a': 'x'}, max_batch=10, "
        "pool_size=50, timeout=5)"
    )
    assert "s3cr" not in text and "s3cr" not in repr(pickle.loads(pickle.dumps(source)))


@pytest.mark.parametrize(
    ("template", "key", "expected"),
    [
        ("user:{}", 42, b"user:42"),
        ("user:{}", "é", "user:é".encode()),
        ("user:{}", b"\x00\xff", b"user:\x00\xff"),
        ("user:{}", ("a",), b"user:a"),
        ("o:{}:{}", ("eu", 7), b"o:eu:7"),
        ("{{tag}}:{}", 1, b"{tag}:1"),
    ],
)
def test_key_template_renders_bytes(template: str, key: Any, expected: bytes) -> None:
    assert KeyTemplate.parse(template, "utf-8").render(key) == expected


@pytest.mark.parametrize("key", [("a", "b"), 1.5, True, None, "a"])
def test_key_template_rejects_misfits(key: Any) -> None:
    template = KeyTemplate.parse("o:{}:{}" if key == "a" else "o:{}", "utf-8")
    with pytest.raises(TypeError):
        template.render(key)


def test_pack_bounds_keys_per_pipeline() -> None:
    commands = [Command(("HGETALL", b"k"), (i,), (b"k",)) for i in range(250)]
    mgets = [Command(("MGET",), tuple(range(n)), ()) for n in (60, 50, 40, 100)]

    assert [len(batch) for batch in pack(commands, 100)] == [100, 100, 50]
    assert [[len(c.keys) for c in batch] for batch in pack(mgets, 100)] == [[60], [50, 40], [100]]


@pytest.mark.parametrize("template", ["user:{}", "{}", "100%:{}:%d%%", "{{tag}}:{}", "k:{}:é"])
@pytest.mark.parametrize("key", [0, -7, 2**70, "é", "", "%d"])
def test_key_template_single_part_keys_render_as_one_tuples(template: str, key: Any) -> None:
    # A scalar key takes a fast path; a 1-tuple the general one: they must agree.
    parsed = KeyTemplate.parse(template, "utf-8")
    copy = pickle.loads(pickle.dumps(parsed))

    assert parsed.render(key) == parsed.render((key,)) == copy.render(key)
    assert copy == parsed and hash(copy) == hash(parsed)
