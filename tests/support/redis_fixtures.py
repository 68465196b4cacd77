"""pytest fixtures giving tests real Redis servers (see ``tests.support.redis_server``).

Import them into a conftest: ``from tests.support.redis_fixtures import *``.
Session-scoped servers are shared; the function-scoped client fixtures flush the data
and reset the command statistics (``INFO commandstats``) before each test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from .redis_server import (
    ContainerRedis,
    FeatureMissing,
    RedisClusterServers,
    RedisServer,
    RedisUnavailable,
    start_cluster,
    start_standalone,
)

__all__ = (
    "SECURED_ADMIN_PASSWORD",
    "SECURED_READER",
    "SECURED_READER_PASSWORD",
    "cluster_client",
    "redis_client",
    "redis_cluster",
    "redis_server",
    "restartable_redis",
    "secured_redis",
    "tls_redis",
)

# Distinctive secrets, so a test can prove they appear nowhere.
SECURED_ADMIN_PASSWORD = "adm1n-S3CRET-7f3a9c"
SECURED_READER = "reader"
SECURED_READER_PASSWORD = "r3ader-S3CRET-b81d44"


def _fail_without_redis(exc: RedisUnavailable) -> None:
    pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def redis_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisServer | ContainerRedis]:
    """A standalone Redis shared by the session: ``.host``, ``.port``, ``.url``, ``client()``."""
    try:
        server = start_standalone(tmp_path_factory.mktemp("redis"))
    except RedisUnavailable as exc:
        _fail_without_redis(exc)
        raise
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server: RedisServer | ContainerRedis) -> Iterator[redis.Redis]:
    """A sync client of ``redis_server``, after FLUSHALL and CONFIG RESETSTAT."""
    client = redis_server.client()
    client.flushall()
    client.config_resetstat()
    yield client
    client.close()


@pytest.fixture
def restartable_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A standalone server of this test's own, which the test may stop and restart."""
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis-restartable")).start()
    except RedisUnavailable as exc:
        _fail_without_redis(exc)
        raise
    yield server
    server.stop()


@pytest.fixture(scope="session")
def secured_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A server with ``requirepass`` and an ACL user that may only read ``user:*`` keys."""
    try:
        server = RedisServer(
            tmp_path_factory.mktemp("redis-secured"),
            password=SECURED_ADMIN_PASSWORD,
            users={SECURED_READER: (SECURED_READER_PASSWORD, "~user:* +@read +@connection")},
        ).start()
    except RedisUnavailable as exc:
        _fail_without_redis(exc)
        raise
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A server speaking TLS only; its CA certificate is ``.ca_file``."""
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis-tls"), tls=True).start()
    except FeatureMissing as exc:
        # Only TLS is missing (an embedded binary): the other tests still run.
        pytest.skip(str(exc))
    except RedisUnavailable as exc:
        _fail_without_redis(exc)
        raise
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """A 3-master Redis Cluster shared by the session: ``.url``, ``.nodes``, ``client()``."""
    try:
        cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster"), masters=3)
    except FeatureMissing as exc:  # a system redis-server < 7.0 and no embedded one
        pytest.skip(str(exc))
    except RedisUnavailable as exc:
        _fail_without_redis(exc)
        raise
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_client(redis_cluster: RedisClusterServers) -> Iterator[redis.RedisCluster]:
    """A sync cluster client, after every master was flushed and its stats reset."""
    for node in redis_cluster.node_clients():
        node.flushall()
        node.config_resetstat()
    client = redis_cluster.client()
    yield client
    redis_cluster.close_clients()
