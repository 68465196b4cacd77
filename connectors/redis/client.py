"""Redis clients shared per process and loop, pipelined execution, driver error mapping.

A client is opened lazily by the first lookup on a loop and kept in the connectors'
per-loop registry (:mod:`enrich.protect.loop_local`): every copy of a source with the same
connection settings running on that loop shares it, and in production (one runtime loop
per process) there is one pool per process.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis import exceptions as rx
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff

from enrich.spi import (
    AdaptiveLimit,
    JobLimiter,
    LookupFailed,
    Slots,
    SourceUnavailable,
    close_limiter,
    held_back,
    limiter_for,
    loop_resource,
    mask_text,
    pop_loop_resource,
    process_limit,
)

from .codec import Command
from .config import ConnectionSettings, Endpoint
from .connection import connection_class

_log = logging.getLogger("connectors.redis")

AnyClient = Redis | RedisCluster

# Errors that concern the connection or the whole cluster, not one key: when a pipeline
# reports one of them for a command, the whole call fails.
_CALL_LEVEL = (rx.ConnectionError, rx.TimeoutError, rx.ClusterError, rx.RedisClusterException)
# What we translate; anything else (a bug) propagates unchanged.
_DRIVER_ERRORS = (rx.RedisError, rx.RedisClusterException, OSError, asyncio.TimeoutError)


@dataclass(eq=False)
class ClientHandle:
    """A client, the loop it belongs to, and a limit on its concurrent pipelines."""

    client: AnyClient
    loop: asyncio.AbstractEventLoop
    # Bounds pipelines in flight to the pool size: a cluster node raises instead of
    # waiting when its connections run out, and a blocking pool would time out.
    limiter: asyncio.Semaphore
    # The sentinels' own clients, when the master is found through Sentinel.
    sentinel: Sentinel | None = None
    # concurrency="auto": the limit the slots follow (the limiter above then bounds
    # nothing the slots do not); else None.
    adaptive: AdaptiveLimit | None = None
    slots: Slots | None = None
    # job_rate_limit: this process's share of the job's keys per second, else None.
    job_limiter: JobLimiter | None = None

    async def aclose(self) -> None:
        """Close the client's connections, and the sentinels' when there are any."""
        try:
            await self.client.aclose()
        finally:
            if self.sentinel is not None:
                await self.sentinel.aclose()


_REGISTRY = "connectors.redis"


def client_for(settings: ConnectionSettings) -> ClientHandle:
    """This process's client for ``settings`` on the running loop, opened on first use."""
    return loop_resource(_REGISTRY, settings, lambda loop: _open(settings, loop))


async def close_client(settings: ConnectionSettings) -> None:
    """Close and forget the running loop's client for ``settings``, if there is one."""
    if settings.job_rate_limit is not None:
        await close_limiter(settings.job_rate_limit)
    handle = pop_loop_resource(_REGISTRY, settings)
    if handle is not None:
        _log.debug("closing redis client for %s", settings.endpoint.masked_url())
        await handle.aclose()


def adaptive_key(settings: ConnectionSettings) -> tuple[str, ConnectionSettings]:
    """The key of a pool's adaptive limit in this process (see enrich.protect.adaptive)."""
    return (_REGISTRY, settings)


def _open(settings: ConnectionSettings, loop: asyncio.AbstractEventLoop) -> ClientHandle:
    handle = _open_client(settings, loop)
    if settings.concurrency == "auto":
        handle.adaptive = process_limit(adaptive_key(settings), settings.pool_size)
        handle.slots = Slots(handle.adaptive.limit)
    if settings.job_rate_limit is not None:
        handle.job_limiter = limiter_for(settings.job_rate_limit)
    return handle


def _open_client(settings: ConnectionSettings, loop: asyncio.AbstractEventLoop) -> ClientHandle:
    endpoint = settings.endpoint
    _log.debug(
        "opening redis client for %s (pool_size=%d, cluster=%s)",
        endpoint.masked_url(),
        settings.pool_size,
        endpoint.cluster,
    )
    common: dict[str, Any] = {
        "username": endpoint.username,
        "password": endpoint.password,
        "socket_timeout": settings.timeout,
        "socket_connect_timeout": settings.timeout,
        "decode_responses": False,
    }
    if endpoint.tls:
        common.update(
            ssl_ca_certs=settings.tls_ca_certs,
            ssl_cert_reqs="required" if settings.tls_verify else "none",
            ssl_check_hostname=settings.tls_verify,
        )
    client: AnyClient
    # One immediate retry on a connection error: a pooled connection may have been
    # closed by a server restart or a failover. Further retries are the engine's policy.
    retry = Retry(NoBackoff(), 1, supported_errors=(rx.ConnectionError,))
    limiter = asyncio.Semaphore(settings.pool_size)
    if endpoint.is_sentinel:
        # redis.asyncio.sentinel has no annotations (hence the ignores below).
        sentinel = Sentinel(  # type: ignore[no-untyped-call,unused-ignore]
            list(endpoint.sentinels),
            sentinel_kwargs={
                "username": endpoint.sentinel_username,
                "password": endpoint.sentinel_password,
                "socket_timeout": settings.timeout,
                "socket_connect_timeout": settings.timeout,
                # redis-py's default backs off for seconds on an unreachable sentinel;
                # the other sentinels are asked next, and retrying is the engine's job.
                "retry": Retry(NoBackoff(), 0),
            },
        )
        # The pool asks the sentinels for the master's address on every new connection,
        # and drops idle connections when that address changes. It raises rather than
        # waits when its connections run out: the limiter keeps pipelines within it.
        client = sentinel.master_for(
            endpoint.service or "",
            connection_pool_class=_OneQuestionAtATime,
            max_connections=settings.pool_size,
            db=endpoint.db,
            retry=retry,
            **common,
        )
        return ClientHandle(client=client, loop=loop, limiter=limiter, sentinel=sentinel)
    if endpoint.cluster:
        # The cluster client keeps its own retry policy: it also drives MOVED/ASK handling.
        client = RedisCluster(
            host=endpoint.host,
            port=endpoint.port,
            max_connections=settings.pool_size,
            ssl=endpoint.tls,
            **common,
        )
    else:
        pool = BlockingConnectionPool(
            max_connections=settings.pool_size,
            timeout=settings.timeout,
            connection_class=connection_class(endpoint.tls),
            host=endpoint.host,
            port=endpoint.port,
            db=endpoint.db,
            retry=retry,
            **common,
        )
        client = Redis.from_pool(pool)
    return ClientHandle(client=client, loop=loop, limiter=limiter)


class _OneQuestionAtATime(SentinelConnectionPool):
    """A Sentinel pool that asks the sentinels for the master one question at a time.

    After a failover every pooled connection reconnects at once, and redis-py would ask
    the sentinels once per connection, concurrently: a burst of sentinel connections
    for one answer, some of which redis-py loses track of (never closed). One question
    at a time gives the same answer to all of them.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._asking = asyncio.Lock()

    async def get_master_address(self) -> Any:
        async with self._asking:
            return await super().get_master_address()  # type: ignore[no-untyped-call]


async def execute(
    handle: ClientHandle, batches: Sequence[Sequence[Command]], endpoint: Endpoint
) -> list[list[Any]]:
    """Send each batch as one non-transactional pipeline, batches concurrently.

    Returns the replies of each batch in command order; a command's own error (such as
    WRONGTYPE) is its reply, as an exception instance.

    Raises:
        LookupFailed: a connection, timeout, authentication or cluster error, which
            fails the whole call (``SourceUnavailable`` when the store is unreachable).
    """

    async def run(batch: Sequence[Command]) -> list[Any]:
        if handle.job_limiter is not None:
            await handle.job_limiter.acquire(sum(len(command.keys) for command in batch))
        if handle.adaptive is not None:
            return await _run_adaptive(handle, batch)
        if handle.limiter.locked():
            with held_back():  # queued behind our own pipelines: not the store's time
                await handle.limiter.acquire()
        else:
            await handle.limiter.acquire()
        try:
            # execute() resets the pipeline (releasing its connections) whatever happens.
            pipe = handle.client.pipeline(transaction=False)
            for command in batch:
                pipe.execute_command(*command.args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            return replies
        finally:
            handle.limiter.release()

    outcomes = await asyncio.gather(*(run(batch) for batch in batches), return_exceptions=True)
    results: list[list[Any]] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            if isinstance(outcome, _DRIVER_ERRORS):
                raise translate(outcome, endpoint) from outcome
            raise outcome
        for reply in outcome:
            if isinstance(reply, _CALL_LEVEL):
                raise translate(reply, endpoint) from reply
        results.append(outcome)
    return results


async def _run_adaptive(handle: ClientHandle, batch: Sequence[Command]) -> list[Any]:
    """One pipeline under the adaptive limit: its latency, and whether it timed out,
    move the limit (``concurrency="auto"``)."""
    slots, adaptive = handle.slots, handle.adaptive
    assert slots is not None and adaptive is not None
    if not slots.take():
        await slots.wait()
    started = time.perf_counter()
    timed_out = False
    try:
        async with handle.limiter:  # still the pool's bound (a cluster node's connections)
            pipe = handle.client.pipeline(transaction=False)
            for command in batch:
                pipe.execute_command(*command.args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            return replies
    except (rx.TimeoutError, asyncio.TimeoutError):
        timed_out = True
        raise
    finally:
        slots.release_sampled(adaptive, time.perf_counter() - started, throttled=timed_out)


def is_denied(exc: BaseException) -> bool:
    """Whether the server refused a command for lack of permission (ACL NOPERM)."""
    return isinstance(exc, rx.NoPermissionError)


def translate(exc: BaseException, endpoint: Endpoint, key: Any = None) -> LookupFailed:
    """A :class:`LookupFailed` for a driver error; its message names host:port, no secret."""
    where = f"redis at {endpoint.address}"
    detail = mask_text(f"{type(exc).__name__}: {exc}", endpoint.secrets)
    error: LookupFailed
    if isinstance(exc, (rx.AuthenticationError, rx.AuthenticationWrongNumberOfArgsError)):
        user = f" for user {endpoint.username!r}" if endpoint.username else ""
        error = SourceUnavailable(
            f"{where} refused authentication{user} ({detail})",
            key=key,
            kind="auth",
            retryable=False,
        )
    elif isinstance(exc, rx.NoPermissionError):
        error = LookupFailed(
            f"{where} denied the command ({detail})", key=key, kind="noperm", retryable=False
        )
    elif isinstance(exc, rx.BusyLoadingError):
        error = SourceUnavailable(
            f"{where} is loading its dataset ({detail})", key=key, kind="loading"
        )
    elif isinstance(exc, rx.MaxConnectionsError) or str(exc) == "No connection available.":
        error = LookupFailed(f"{where}: connection pool exhausted ({detail})", key=key, kind="pool")
    elif _caused_by(exc, ssl.SSLCertVerificationError):
        error = SourceUnavailable(
            f"{where}: TLS certificate not trusted ({detail})",
            key=key,
            kind="tls",
            retryable=False,
        )
    elif isinstance(exc, (rx.TimeoutError, asyncio.TimeoutError)):
        error = LookupFailed(f"{where} timed out ({detail})", key=key, kind="timeout")
    elif isinstance(exc, (rx.ConnectionError, OSError)):
        error = SourceUnavailable(f"{where} is unreachable ({detail})", key=key, kind="connection")
    elif isinstance(exc, (rx.ClusterError, rx.RedisClusterException, rx.TryAgainError)):
        error = SourceUnavailable(
            f"{where}: cluster not available ({detail})", key=key, kind="cluster"
        )
    elif isinstance(exc, rx.ResponseError) and str(exc).startswith("WRONGTYPE"):
        error = LookupFailed(
            f"{where}: key holds the wrong kind of value ({detail})",
            key=key,
            kind="wrongtype",
            retryable=False,
        )
    else:
        error = LookupFailed(
            f"{where} answered with an error ({detail})", key=key, kind="redis", retryable=False
        )
    _log.debug("%s", error)
    return error


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 10:  # bounded: chains may be cyclic
        if isinstance(current, kind):
            return True
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False
