"""Real failures through the whole join: undecodable values, a Redis restart mid-run,
and secrets that must not leak from any error, log line or repr."""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import enrich
from enrich import FixedDelayRetry, lookup_rows
from tests.integration.conftest import MakeHttp, MakeRedis, command_calls
from tests.support.http_server import HttpTestServer
from tests.support.redis_fixtures import (
    SECURED_ADMIN_PASSWORD,
    SECURED_READER,
    SECURED_READER_PASSWORD,
)
from tests.support.redis_server import RedisServer

WRONG_PASSWORD = "wr0ng-S3CRET-5e77aa"
TOKEN = "tok-S3CRET-91c0de"
QUERY_SECRET = "q-S3CRET-44f1b2"
SECRETS = (SECURED_ADMIN_PASSWORD, SECURED_READER_PASSWORD, WRONG_PASSWORD, TOKEN, QUERY_SECRET)


# -- undecodable values in Redis --------------------------------------------------------


@pytest.fixture
def scores(redis_client: redis.Redis) -> redis.Redis:
    redis_client.set("s:1", json.dumps({"score": 1.5}))
    redis_client.set("s:2", b'{"score": 2.5')  # truncated JSON
    redis_client.set("s:3", json.dumps({"score": "high"}))  # not a double
    redis_client.set("s:4", b"\xff\xfe")  # not even UTF-8
    return redis_client


def test_undecodable_redis_values_fail_their_own_rows_only(
    scores: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    source = make_redis(redis_server.url, key_template="s:{}", value="json", schema="score double")
    data = [{"id": k} for k in (1, 2, 3, 4, 5)]
    out = list(lookup_rows(data, source, on="id", on_error="error_column"))
    assert [(r["id"], r["score"]) for r in out] == [(1, 1.5), (2, None), (3, None), (4, None),
                                                    (5, None)]  # fmt: skip
    errors = [r["enrich_error"] for r in out]
    assert errors[0] is None and errors[4] is None
    assert errors[1].startswith("decode: redis key b's:2': value is not valid JSON (")
    assert errors[1].endswith("""): b'{"score": 2.5'""")
    assert errors[2] == "decode: redis key b's:3': field 'score': cannot read 'high' as double"
    assert errors[3].startswith("decode: redis key b's:4': value is not valid JSON (")
    assert command_calls(scores, "mget") == 1  # one bad value spoils no other key


@pytest.mark.parametrize("policy", ["null", "drop"])
def test_undecodable_redis_values_follow_the_policy(
    scores: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis, policy: str
) -> None:
    source = make_redis(redis_server.url, key_template="s:{}", value="json", schema="score double")
    out = list(lookup_rows([{"id": k} for k in (1, 2, 5)], source, on="id", on_error=policy))
    expected = {"null": [(1, 1.5), (2, None), (5, None)], "drop": [(1, 1.5), (5, None)]}[policy]
    assert [(r["id"], r["score"]) for r in out] == expected


def test_an_undecodable_redis_value_fails_the_run_under_the_fail_policy(
    scores: redis.Redis, redis_server: RedisServer, make_redis: MakeRedis
) -> None:
    source = make_redis(redis_server.url, key_template="s:{}", value="json", schema="score double")
    it = lookup_rows([{"id": 1}, {"id": 2}, {"id": 1}], source, on="id")
    with pytest.raises(enrich.DecodeError, match=r"redis key b's:2': value is not valid JSON"):
        list(it)


# -- a Redis restart in the middle of a run ---------------------------------------------


def test_a_redis_restart_mid_run_loses_no_row_with_retries(
    restartable_redis: RedisServer, make_redis: MakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="connectors.redis")
    server = restartable_redis
    client = server.client()
    with client.pipeline(transaction=False) as pipe:
        for k in range(300):
            pipe.set(f"user:{k}", json.dumps({"name": f"n{k}", "age": k}))
        pipe.execute()
    client.save()  # the restarted server loads this snapshot before it serves anything
    felt = threading.Event()

    class Felt(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "is unreachable" in record.getMessage():
                felt.set()

    def restart() -> None:
        # Back only once a lookup has met the dead server: on a busy machine a quick
        # restart could come back before any lookup was sent, and nothing be tested.
        felt.wait(timeout=60)
        server.start()

    handler = Felt()
    logging.getLogger("connectors.redis").addHandler(handler)
    restarter = threading.Thread(target=restart, name="redis-restarter")
    rows_total, stop_at = 3000, 500

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(rows_total):
            if i == stop_at:
                # Down now; back once a fresh process has loaded the snapshot, while the
                # run goes on: the records admitted meanwhile meet a dead server.
                server.stop()
                restarter.start()
            yield {"i": i, "user_id": (i * 7) % 300}

    source = make_redis(
        server.url, key_template="user:{}", value="json", schema="name string, age int"
    )
    retry = FixedDelayRetry(max_attempts=200, delay=0.02)
    it = lookup_rows(rows(), source, on="user_id", capacity=16, max_batch=8, retry=retry)
    try:
        out = list(it)
    finally:
        logging.getLogger("connectors.redis").removeHandler(handler)
        if restarter.ident is not None:
            restarter.join(timeout=90)
    expected = [
        {"i": i, "user_id": (i * 7) % 300, "name": f"n{(i * 7) % 300}", "age": (i * 7) % 300}
        for i in range(rows_total)
    ]
    assert out == expected
    # The outage was felt (lookups met the dead server), and recovered from.
    assert any("is unreachable" in r.getMessage() for r in caplog.records)
    assert server.client().get("user:0") is not None  # the server that answered is back


# -- secrets --------------------------------------------------------------------------


def texts_of(error: BaseException) -> list[str]:
    """str, repr and the formatted traceback of ``error`` and of its whole chain."""
    texts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts += [str(current), repr(current), repr(current.args)]
        current = current.__cause__ or current.__context__
    return texts


def log_texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    texts = [caplog.text]
    for record in caplog.records:
        texts += [record.getMessage(), record.exc_text or "", repr(record.args)]
    return texts


def assert_no_secret(texts: list[str]) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked in {text[:300]!r}"


@pytest.fixture
def secured_users(secured_redis: RedisServer) -> RedisServer:
    admin = secured_redis.client()
    admin.flushall()
    admin.set("user:1", json.dumps({"name": "Ada"}))
    admin.set("secret:1", json.dumps({"name": "hidden"}))
    admin.close()
    return secured_redis


def test_a_wrong_redis_password_leaks_nowhere(
    secured_users: RedisServer, make_redis: MakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"redis://{SECURED_READER}:{WRONG_PASSWORD}@127.0.0.1:{secured_users.port}/0"
    source = make_redis(url, key_template="user:{}", value="json", schema="name string")
    texts = [repr(source)]
    out = list(lookup_rows([{"id": 1}, {"id": 2}], source, on="id", on_error="error_column"))
    assert [r["name"] for r in out] == [None, None]
    for row in out:
        assert row["enrich_error"].startswith(
            f"auth: redis at 127.0.0.1:{secured_users.port} refused authentication for user "
            f"'{SECURED_READER}'"
        )
        texts.append(row["enrich_error"])
    with pytest.raises(enrich.SourceUnavailable) as raised:
        list(lookup_rows([{"id": 1}], source, on="id"))
    assert raised.value.kind == "auth"
    assert raised.value.__cause__ is not None  # the driver's error is kept, masked
    texts += texts_of(raised.value)
    assert any("refused authentication" in r.getMessage() for r in caplog.records)
    assert_no_secret(texts + log_texts(caplog))


def test_a_denied_key_with_the_right_password_leaks_nowhere(
    secured_users: RedisServer, make_redis: MakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"redis://{SECURED_READER}:{SECURED_READER_PASSWORD}@127.0.0.1:{secured_users.port}/0"
    source = make_redis(url, key_template="{}", value="json", schema="name string")
    texts = [repr(source)]
    # The password is right: an allowed key is read.
    assert list(lookup_rows([{"k": "user:1"}], source, on="k")) == [{"k": "user:1", "name": "Ada"}]
    (row,) = lookup_rows([{"k": "secret:1"}], source, on="k", on_error="error_column")
    assert row["name"] is None
    assert row["enrich_error"].startswith(
        f"noperm: redis at 127.0.0.1:{secured_users.port} denied the command ("
    )
    texts.append(row["enrich_error"])
    with pytest.raises(enrich.LookupFailed) as raised:
        list(lookup_rows([{"k": "secret:1"}], source, on="k"))
    assert (raised.value.kind, raised.value.key) == ("noperm", "secret:1")
    texts += texts_of(raised.value)
    assert_no_secret(texts + log_texts(caplog))


def test_a_denied_key_does_not_fail_the_allowed_keys_batched_with_it(
    secured_users: RedisServer, make_redis: MakeRedis
) -> None:
    url = f"redis://{SECURED_READER}:{SECURED_READER_PASSWORD}@127.0.0.1:{secured_users.port}/0"
    source = make_redis(url, key_template="{}", value="json", schema="name string")
    data = [{"k": "user:1"}, {"k": "secret:1"}]
    out = list(lookup_rows(data, source, on="k", on_error="error_column"))
    assert out[0] == {"k": "user:1", "name": "Ada", "enrich_error": None}
    assert out[1]["enrich_error"].startswith("noperm: ")


def test_an_http_token_and_query_secret_leak_nowhere(
    http_server: HttpTestServer, make_http: MakeHttp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    http_server.fail("u1", 401)
    http_server.fail("u2", 403)
    source = make_http(
        f"/users/{{}}?token={QUERY_SECRET}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    texts = [repr(source), str(source)]
    data = [{"uid": "u1"}, {"uid": "u2"}]
    out = list(lookup_rows(data, source, on="uid", on_error="error_column"))
    assert [r["enrich_error"].split(":", 2)[:2] for r in out] == [
        ["status", "401"],
        ["status", "403"],
    ]
    texts += [r["enrich_error"] for r in out]
    with pytest.raises(enrich.SourceUnavailable) as raised:
        list(lookup_rows(data[:1], source, on="uid"))
    texts += texts_of(raised.value)
    # The secrets did go out: that is what makes their absence above meaningful.
    sent = http_server.requests
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in sent)
    assert all(f"token={QUERY_SECRET}" in r.raw_path for r in sent)
    assert_no_secret(texts + log_texts(caplog))
