"""No form of a Redis password is echoed: userinfo, query parameters, keywords, sentinels."""

from __future__ import annotations

import json
import logging
import pickle
import traceback

import pytest

from connectors.redis import RedisLookup
from enrich import LookupFailed, SourceUnavailable
from enrich.protect.masking import is_secret_name, mask_text
from tests.connectors.redis.conftest import MakeLookup
from tests.support.redis_fixtures import SECURED_ADMIN_PASSWORD, SECURED_READER_PASSWORD
from tests.support.redis_server import RedisServer, free_port

WRONG = "wr0ng-Qu3ry-S3CRET-4d2b"
SENTINEL_SECRET = "s3ntinel-S3CRET-91ab"
SECRETS = (SECURED_ADMIN_PASSWORD, SECURED_READER_PASSWORD, WRONG, SENTINEL_SECRET)
SCHEMA = {"key_template": "user:{}", "value": "json", "schema": "name string"}


def _texts(error: BaseException) -> str:
    return "\n".join([str(error), repr(error), *traceback.format_exception(error)])


def _assert_hidden(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


@pytest.fixture
def secured_data(secured_redis: RedisServer) -> RedisServer:
    admin = secured_redis.client()
    admin.flushall()
    admin.set("user:1", json.dumps({"name": "Ada"}))
    admin.close()
    return secured_redis


@pytest.mark.asyncio
async def test_password_query_parameter_authenticates_and_is_masked(
    secured_data: RedisServer, make_lookup: MakeLookup
) -> None:
    port = secured_data.port
    source = make_lookup(f"redis://127.0.0.1:{port}/0?password={SECURED_ADMIN_PASSWORD}", **SCHEMA)

    assert await source.lookup_many([1]) == {1: ("Ada",)}
    assert repr(source).startswith(f"RedisLookup('redis://:***@127.0.0.1:{port}/0'")
    _assert_hidden(repr(source), repr(pickle.loads(pickle.dumps(source))))


@pytest.mark.asyncio
async def test_wrong_query_password_is_an_auth_error_that_does_not_echo_it(
    secured_data: RedisServer, make_lookup: MakeLookup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"redis://127.0.0.1:{secured_data.port}/0?username=default&password={WRONG}"
    source = make_lookup(url, **SCHEMA)

    with pytest.raises(SourceUnavailable) as caught:
        await source.lookup_many([1])

    assert caught.value.kind == "auth"
    assert caplog.records
    _assert_hidden(_texts(caught.value), repr(source), caplog.text)


@pytest.mark.asyncio
async def test_unreachable_store_errors_do_not_echo_passwords(
    make_lookup: MakeLookup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    sources = [
        # Refused at once; a short timeout would only risk a "timeout" on a busy machine.
        make_lookup(f"redis://127.0.0.1:{port}/0?password={WRONG}", timeout=30.0, **SCHEMA),
        make_lookup(
            f"redis+sentinel://:{WRONG}@127.0.0.1:{port}/mymaster/0",
            sentinel_password=SENTINEL_SECRET,
            timeout=30.0,
            **SCHEMA,
        ),
    ]
    errors = []
    for source in sources:
        with pytest.raises(LookupFailed) as caught:
            await source.lookup_many([1])
        errors.append(caught.value)

    assert [e.kind for e in errors] == ["connection", "connection"]
    assert f"127.0.0.1:{port}" in str(errors[0])
    assert "master 'mymaster' via sentinels" in str(errors[1])
    _assert_hidden(*map(_texts, errors), *map(repr, sources), caplog.text)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://h:6390/0?password={WRONG}&socket_timeout=3",
        f"redis://h:6390/x?password={WRONG}",
        f"redis://u:{WRONG}@h:6390/0?password={WRONG}",
        f"redis://h:6390/0?password={WRONG}#frag",
        f"redis+sentinel://:{WRONG}@h:1,h:2",
        f"redis+sentinel://h:1/m?sentinel_password={WRONG}&x=1",
        f"http://:{WRONG}@h:1/0",
    ],
)
def test_validation_errors_do_not_echo_passwords(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        RedisLookup(url, **SCHEMA)  # type: ignore[arg-type]
    assert "***" in str(caught.value)
    _assert_hidden(str(caught.value))


def test_sentinel_repr_masks_both_passwords() -> None:
    source = RedisLookup(
        f"redis+sentinel://app:{WRONG}@s1:26380,s2,[::1]:26381/mymaster/2",
        sentinel_username="watcher",
        sentinel_password=SENTINEL_SECRET,
        **SCHEMA,  # type: ignore[arg-type]
    )
    text = repr(source)
    assert text.startswith(
        "RedisLookup('redis+sentinel://app:***@s1:26380,s2:26379,[::1]:26381/mymaster/2'"
    )
    _assert_hidden(text, repr(source._settings))


def test_mask_text_hides_urls_pairs_headers_and_given_secrets() -> None:
    text = (
        f"connect redis://u:{WRONG}@h:1/0?password={WRONG} failed; password={WRONG}, "
        f"api_key = {WRONG}\nAuthorization: Bearer {WRONG}\n"
        f"see http://svc/x?sig={WRONG}#{WRONG} and {SENTINEL_SECRET}"
    )
    masked = mask_text(text, [SENTINEL_SECRET, None])
    _assert_hidden(masked)
    assert "redis://u:***@h:1/0?password=***" in masked
    assert "Authorization: ***" in masked and "api_key = ***" in masked
    assert mask_text("refused authentication for user 'reader'") == (
        "refused authentication for user 'reader'"
    )


@pytest.mark.parametrize(
    "name",
    ["Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key",
     "X-Auth-Token", "access_token", "password", "client_secret", "sig", "key"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)
    assert mask_text(f"{name}=v&Accept=json") == f"{name}=***&Accept=json"


@pytest.mark.parametrize("name", ["Accept", "Content-Type", "User-Agent", "id", "db", "v"])
def test_plain_names(name: str) -> None:
    assert not is_secret_name(name)
