"""Failures: authentication, ACLs, refused connections, timeouts, restarts; no secret leaks."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
from collections.abc import AsyncIterator

import pyarrow as pa
import pytest
import pytest_asyncio

from enrich import LookupFailed, SourceUnavailable
from enrich.lookup.contract.columnar_answer import struct_rows
from tests.connectors.redis.conftest import MakeLookup
from tests.support.redis_fixtures import (
    SECURED_ADMIN_PASSWORD,
    SECURED_READER,
    SECURED_READER_PASSWORD,
)
from tests.support.redis_server import RedisServer, free_port

SECRETS = (SECURED_ADMIN_PASSWORD, SECURED_READER_PASSWORD, "wr0ng-S3CRET-0c9e21")


def _assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


@pytest.fixture
def secured_data(secured_redis: RedisServer) -> RedisServer:
    admin = secured_redis.client()
    admin.flushall()
    admin.set("user:1", json.dumps({"name": "Ada"}))
    admin.set("secret:1", json.dumps({"name": "hidden"}))
    admin.close()
    return secured_redis


@pytest.mark.asyncio
async def test_acl_user_in_url_authenticates(
    secured_data: RedisServer, make_lookup: MakeLookup
) -> None:
    url = f"redis://{SECURED_READER}:{SECURED_READER_PASSWORD}@127.0.0.1:{secured_data.port}/0"
    source = make_lookup(url, key_template="user:{}", value="json", schema="name string")

    assert await source.lookup_many([1, 2]) == {1: ("Ada",), 2: None}
    assert repr(source).startswith(
        f"RedisLookup('redis://{SECURED_READER}:***@127.0.0.1:{secured_data.port}/0'"
    )
    _assert_no_secret(repr(source), str(pickle.loads(pickle.dumps(source))))


@pytest.mark.asyncio
async def test_password_keyword_authenticates_default_user(
    secured_data: RedisServer, make_lookup: MakeLookup
) -> None:
    source = make_lookup(
        secured_data.url,
        password=SECURED_ADMIN_PASSWORD,
        key_template="secret:{}",
        value="json",
        schema="name string",
    )

    assert await source.lookup_many([1]) == {1: ("hidden",)}
    assert f"redis://:***@127.0.0.1:{secured_data.port}/0" in repr(source)
    _assert_no_secret(repr(source))


@pytest.mark.asyncio
async def test_wrong_password_is_unavailable_without_leaking_it(
    secured_data: RedisServer, make_lookup: MakeLookup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"redis://{SECURED_READER}:wr0ng-S3CRET-0c9e21@127.0.0.1:{secured_data.port}/0"
    source = make_lookup(url, key_template="user:{}", value="json", schema="name string")

    with pytest.raises(SourceUnavailable) as caught:
        await source.lookup_many([1])

    error = caught.value
    assert (error.kind, error.retryable) == ("auth", False)
    assert f"127.0.0.1:{secured_data.port}" in str(error)
    assert caplog.text  # the connector does log; the secret is not in it
    _assert_no_secret(str(error), repr(error), repr(source), caplog.text)
    _assert_no_secret(*(str(e) for e in _chain(error)))


@pytest.mark.asyncio
async def test_missing_password_is_an_auth_failure(
    secured_data: RedisServer, make_lookup: MakeLookup
) -> None:
    source = make_lookup(secured_data.url, key_template="user:{}", value="json", schema="n string")

    with pytest.raises(SourceUnavailable) as caught:
        await source.lookup_many([1])

    assert (caught.value.kind, caught.value.retryable) == ("auth", False)


@pytest.mark.asyncio
async def test_acl_denied_key_fails_only_that_key(
    secured_data: RedisServer, make_lookup: MakeLookup
) -> None:
    url = f"redis://{SECURED_READER}:{SECURED_READER_PASSWORD}@127.0.0.1:{secured_data.port}/0"
    source = make_lookup(url, key_template="{}", value="hash", schema="name string")

    result = await source.lookup_many(["secret:1", "user:2"])

    error = result["secret:1"]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable, error.key) == ("noperm", False, "secret:1")
    assert result["user:2"] is None  # allowed, and a miss
    _assert_no_secret(str(error))


@pytest.mark.asyncio
@pytest.mark.parametrize("max_batch", [500, 1], ids=["one MGET", "an MGET per key"])
async def test_acl_denied_key_fails_only_that_key_on_the_columnar_path(
    secured_data: RedisServer, make_lookup: MakeLookup, max_batch: int
) -> None:
    url = f"redis://{SECURED_READER}:{SECURED_READER_PASSWORD}@127.0.0.1:{secured_data.port}/0"
    source = make_lookup(
        url, key_template="{}", value="json", schema="name string", max_batch=max_batch
    )
    keys = ["secret:1", "user:1", "user:2"]

    answer = await source.lookup_arrow(pa.array(keys), pa.struct([("name", pa.string())]))

    error = answer.errors[0]
    assert isinstance(error, LookupFailed)
    assert (error.kind, error.retryable, error.key) == ("noperm", False, "secret:1")
    assert set(answer.errors) == {0}  # the allowed keys keep their answers
    assert struct_rows(answer.rows)[1:] == [("Ada",), None]
    _assert_no_secret(str(error))


@pytest.mark.asyncio
async def test_connection_refused_names_host_and_port(
    make_lookup: MakeLookup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()  # nothing listens there
    source = make_lookup(
        f"redis://someone:{SECURED_ADMIN_PASSWORD}@127.0.0.1:{port}/0",
        key_template="k:{}",
        value="json",
        schema="a int",
        timeout=30.0,  # refused at once: a short one would only risk a "timeout" when busy
    )

    with pytest.raises(SourceUnavailable) as caught:
        await source.lookup_many(["x"])

    error = caught.value
    assert (error.kind, error.retryable) == ("connection", True)
    assert f"127.0.0.1:{port}" in str(error)
    _assert_no_secret(str(error), repr(source), caplog.text)


@pytest_asyncio.fixture
async def silent_server() -> AsyncIterator[int]:
    """A TCP server that accepts connections and never answers."""
    writers: list[asyncio.StreamWriter] = []

    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    for writer in writers:
        writer.close()
    server.close()
    await server.wait_closed()


@pytest.mark.asyncio
async def test_silent_server_times_out(silent_server: int, make_lookup: MakeLookup) -> None:
    source = make_lookup(
        f"redis://127.0.0.1:{silent_server}/0",
        key_template="k:{}",
        value="json",
        schema="a int",
        timeout=0.2,
    )

    with pytest.raises(LookupFailed) as caught:
        await source.lookup_many(["x"])

    assert (caught.value.kind, caught.value.retryable) == ("timeout", True)
    assert f"127.0.0.1:{silent_server}" in str(caught.value)


@pytest.mark.asyncio
async def test_restart_between_lookups_is_transparent(
    restartable_redis: RedisServer, make_lookup: MakeLookup
) -> None:
    restartable_redis.client().set("k:1", json.dumps({"a": 1}))
    source = make_lookup(restartable_redis.url, key_template="k:{}", value="json", schema="a int")
    assert await source.lookup_many([1]) == {1: (1,)}

    restartable_redis.restart()  # the pooled connection is now dead
    restartable_redis.client().set("k:1", json.dumps({"a": 2}))

    assert await source.lookup_many([1]) == {1: (2,)}


@pytest.mark.asyncio
async def test_lookups_fail_while_down_and_recover_after_restart(
    restartable_redis: RedisServer, make_lookup: MakeLookup
) -> None:
    restartable_redis.client().set("k:1", json.dumps({"a": 1}))
    source = make_lookup(restartable_redis.url, key_template="k:{}", value="json", schema="a int")
    assert await source.lookup_many([1]) == {1: (1,)}

    restartable_redis.stop()
    with pytest.raises(SourceUnavailable) as caught:
        await source.lookup_many([1])
    assert caught.value.retryable
    assert f"127.0.0.1:{restartable_redis.port}" in str(caught.value)

    restartable_redis.start()
    restartable_redis.client().set("k:1", json.dumps({"a": 3}))
    assert await source.lookup_many([1]) == {1: (3,)}


def _chain(error: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(out) < 10:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


@pytest.mark.asyncio
async def test_tls_with_the_servers_ca(tls_redis: RedisServer, make_lookup: MakeLookup) -> None:
    tls_redis.client().set("k:1", json.dumps({"a": 1}))
    source = make_lookup(
        tls_redis.url,
        tls_ca_certs=str(tls_redis.ca_file),
        key_template="k:{}",
        value="json",
        schema="a int",
    )

    assert tls_redis.url.startswith("rediss://")
    assert await source.lookup_many([1, 2]) == {1: (1,), 2: None}


@pytest.mark.asyncio
async def test_tls_with_an_unknown_ca_is_unavailable(
    tls_redis: RedisServer, make_lookup: MakeLookup
) -> None:
    source = make_lookup(tls_redis.url, key_template="k:{}", value="json", schema="a int")

    with pytest.raises(SourceUnavailable) as caught:
        await source.lookup_many([1])

    assert (caught.value.kind, caught.value.retryable) == ("tls", False)
    assert "certificate" in str(caught.value).lower()
    assert f"127.0.0.1:{tls_redis.port}" in str(caught.value)


@pytest.mark.asyncio
async def test_plain_redis_url_cannot_talk_to_a_tls_port(
    tls_redis: RedisServer, make_lookup: MakeLookup
) -> None:
    source = make_lookup(
        f"redis://127.0.0.1:{tls_redis.port}/0",
        key_template="k:{}",
        value="json",
        schema="a int",
        timeout=1.0,
    )

    with pytest.raises(LookupFailed):
        await source.lookup_many([1])
