"""Final errors are never retried: a value that does not decode, a field that does not fit
the schema, a 400 or a 404 costs one request, whatever the retry policy allows; errors
that may pass (a 503) are still retried. Counted at real servers."""

from __future__ import annotations

import json

import pytest
import redis

from enrich import FixedDelayRetry, lookup_rows
from tests.integration.conftest import MakeHttp, MakeRedis, command_calls
from tests.support.http_server import HttpTestServer
from tests.support.redis_server import RedisServer

RETRY = FixedDelayRetry(4, 0.01)


def requests_for(server: HttpTestServer, key: str) -> int:
    return sum(1 for r in server.requests if r.key == key)


@pytest.mark.parametrize(
    ("key", "script", "reason"),
    [
        ("bad", "malformed", "decode: "),
        ("abc", "credit", "decode: field 'credit': cannot read 'abc' as double"),
        ("e400", "400", "status:400: "),
    ],
)
def test_a_final_http_error_costs_one_request(
    http_server: HttpTestServer, make_http: MakeHttp, key: str, script: str, reason: str
) -> None:
    if script == "malformed":
        http_server.malformed.add(key)
    elif script == "credit":
        http_server.data[key] = {"name": "Ada", "credit": "abc"}
    else:
        http_server.fail(key, 400)
    source = make_http(schema="name string, credit double")
    out = list(lookup_rows([{"uid": key}], source, on="uid", on_error="error_column", retry=RETRY))
    assert len(out) == 1 and out[0]["enrich_error"].startswith(reason), out
    assert requests_for(http_server, key) == 1


def test_a_404_is_a_miss_asked_once(http_server: HttpTestServer, make_http: MakeHttp) -> None:
    out = list(lookup_rows([{"uid": "nobody"}], make_http(), on="uid", retry=RETRY))
    assert out == [{"uid": "nobody", "name": None, "age": None}]
    assert requests_for(http_server, "nobody") == 1


def test_a_503_is_still_retried_up_to_the_attempts(
    http_server: HttpTestServer, make_http: MakeHttp
) -> None:
    http_server.fail("busy", 503)
    out = list(lookup_rows([{"uid": "busy"}], make_http(), on="uid", on_error="null", retry=RETRY))
    assert out == [{"uid": "busy", "name": None, "age": None}]
    assert requests_for(http_server, "busy") == 4


def test_an_undecodable_redis_value_costs_one_mget(
    redis_client: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    redis_client.set("s:1", json.dumps({"score": 1.5}))
    redis_client.set("s:2", b'{"score": 2.5')  # truncated JSON
    redis_client.set("s:3", json.dumps({"score": "high"}))  # not a double
    redis_client.config_resetstat()
    source = make_redis(redis_server.url, key_template="s:{}", value="json", schema="score double")
    for key in (2, 3):
        out = list(
            lookup_rows([{"id": key}], source, on="id", on_error="error_column", retry=RETRY)
        )
        assert out[0]["enrich_error"].startswith(f"decode: redis key b's:{key}'"), out
    assert command_calls(redis_client, "mget") == 2  # one per lookup, no retry
