"""What the Redis data sources share: option reading and a masked, synchronous connection.

Data source options arrive as strings (Spark lower-cases their names). Each is read once,
on the driver, into a frozen value that is pickled to the executors; a bad option raises
``ValueError`` naming the option and the value. The ``url`` option may carry a password:
it is only ever shown through :func:`masked`, and Spark itself redacts options named like
``url`` in query plans (``spark.sql.redaction.options.regex``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connectors.redis.endpoint import Endpoint
from enrich.protect.masking import mask_url

if TYPE_CHECKING:  # redis is imported where a connection is opened, on the workers
    import redis

# A socket timeout long enough for an atomic Lua commit of a large batch
# (``atomicCommit``), short enough that a dead server fails a task instead of hanging it.
SOCKET_TIMEOUT = 60.0


def required(options: Mapping[str, str], name: str, fmt: str) -> str:
    """The option ``name``, or a ``ValueError`` saying how to set it."""
    value = options.get(name)
    if value is None or not str(value).strip():
        raise ValueError(f'the {fmt!r} data source needs .option("{name}", ...)')
    return str(value)


def positive_int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    """An optional positive integer option (``default`` when absent)."""
    return _count(options, name, default, 1, "a positive integer")


def row_limit(options: Mapping[str, str], name: str, default: int) -> int | None:
    """A row-count limit option: a positive integer, or ``0`` for no limit (None)."""
    return _count(options, name, default, 0, "a positive integer, or 0 for no limit") or None


def _count(
    options: Mapping[str, str], name: str, default: int | None, least: int, what: str
) -> int | None:
    """The integer option ``name`` (``default`` when absent), at least ``least``."""
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(str(text))
    except ValueError:
        value = least - 1
    if value < least:
        raise ValueError(f"option {name} must be {what}, got {text!r}")
    return value


def endpoint(url: str) -> Endpoint:
    """The endpoint of a ``redis://`` / ``rediss://`` URL (errors mask the password)."""
    where = Endpoint.parse(url, cluster=False, username=None, password=None)
    if where.is_sentinel:
        raise ValueError(
            f"the Redis data sources take a redis:// or rediss:// url, got {masked(url)!r}"
        )
    return where


def masked(url: str) -> str:
    """``url`` with its password, if any, shown as ``***``."""
    return mask_url(url, keep_user=True)


# Per process (keyed by pid: Spark forks its Python workers from a daemon), the
# connection pool of each url and set of client options, and what is_cluster learned.
_pools: dict[tuple[int, str, tuple[tuple[str, Any], ...]], Any] = {}
_clusters: dict[tuple[int, str], bool] = {}
_lock = threading.Lock()


def connect(url: str, **kwargs: Any) -> redis.Redis:
    """A synchronous client of ``url`` (bytes replies) on this process's pool for ``url``.

    Spark reuses a Python worker from task to task, and the driver-side process of a
    data source from micro-batch to micro-batch: the pool keeps their connections open,
    so a task or a commit pays no connect (TCP, ``CLIENT SETINFO``, ``AUTH``, ``SELECT``).
    ``close()`` returns the connection to the pool; a connection the server closed
    meanwhile is reopened when it is next taken from the pool. Connection errors from
    redis-py name the host and port only, never the password.
    """
    import redis

    key = (os.getpid(), url, tuple(sorted(kwargs.items())))
    pool = _pools.get(key)
    if pool is None:
        options = _options(url)
        options.update(kwargs)
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                # Built by redis-py's own client, so TLS, retries and the driver's
                # name are set as for any client.
                pool = _pools[key] = redis.Redis(**options).connection_pool
    return redis.Redis(connection_pool=pool)


def connect_cluster(url: str) -> redis.RedisCluster:
    """A synchronous Redis Cluster client discovering the cluster from the node ``url``."""
    import redis

    options = _options(url)
    del options["db"]  # a cluster has database 0 only
    return redis.RedisCluster(**options)


def is_cluster(url: str) -> bool:
    """Whether the server at ``url`` is a Redis Cluster node (``INFO cluster``).

    Asked once per process and url (the sink's driver-side processes ask it for every
    micro-batch); False when it cannot be reached, and then asked again next time: the
    writes that follow report that failure.
    """
    import redis

    known = _clusters.get((os.getpid(), url))
    if known is not None:
        return known
    try:
        client = redis.Redis(**{**_options(url), "socket_timeout": 10.0})  # not pooled: once
        try:
            info = client.info("cluster")
        finally:
            client.close()
    except redis.RedisError:
        return False
    cluster = _clusters[(os.getpid(), url)] = bool(int(info.get("cluster_enabled", 0)))
    return cluster


def _options(url: str) -> dict[str, Any]:
    where = endpoint(url)
    return {
        "host": where.host,
        "port": where.port,
        "db": where.db,
        "username": where.username,
        "password": where.password,
        "ssl": where.tls,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_connect_timeout": 10.0,
    }
