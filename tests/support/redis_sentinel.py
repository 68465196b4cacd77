"""A Redis Sentinel topology on loopback ports: one master, one replica, three sentinels.

Every process is a local ``redis-server`` (:class:`~tests.support.redis_server.RedisServer`);
the sentinels run it with ``--sentinel``. Failure detection and failover are made short
(``down-after-milliseconds``, ``failover-timeout``) so a test can kill the master and see
the replica promoted within a few seconds::

    topology = start_sentinel_topology(tmp_path)
    topology.client(topology.master).set("k", "v")
    topology.wait_replicated()
    topology.kill_master()             # SIGKILL by pid
    topology.wait_promoted()           # the replica is the master the sentinels report
    topology.stop()
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from .redis_server import STARTUP_TIMEOUT, RedisServer

SERVICE = "mymaster"
DOWN_AFTER_MS = 400
FAILOVER_TIMEOUT_MS = 2000
_POLL = 0.05


@dataclass
class SentinelTopology:
    """The processes of the topology and the URL a lookup uses to reach its master."""

    master: RedisServer
    replica: RedisServer
    sentinels: list[RedisServer]
    service: str = SERVICE
    _clients: dict[int, redis.Redis] = field(default_factory=dict, init=False, repr=False)

    def client(self, server: RedisServer) -> redis.Redis:
        """One sync client per server, kept for polling (closed when the server stops)."""
        client = self._clients.get(server.port)
        if client is None or server.process is None:
            client = self._clients[server.port] = server.client(socket_timeout=2)
        return client

    @property
    def url(self) -> str:
        """``redis+sentinel://`` naming the three sentinels and the service, database 0."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def reported_master(self) -> tuple[str, int] | None:
        """The master address the first sentinel that answers reports, or None."""
        for sentinel in self.sentinels:
            if sentinel.process is None:
                continue
            try:
                host, port = self.client(sentinel).sentinel_get_master_addr_by_name(self.service)
            except (redis.ConnectionError, TypeError):
                continue
            return (host.decode() if isinstance(host, bytes) else host), int(port)
        return None

    def wait_replicated(self) -> None:
        """Wait until the replica has everything written to the master so far."""
        self.client(self.master).execute_command("WAIT", 1, int(STARTUP_TIMEOUT * 1000))

    def kill_master(self) -> None:
        """Kill the master with SIGKILL by its pid: no shutdown, no goodbye to anyone."""
        process = self.master.process
        assert process is not None
        self.master.close_clients()
        self._clients.pop(self.master.port, None)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        self.master.process = None

    def wait_promoted(self, timeout: float = 20.0) -> None:
        """Wait until the sentinels report the replica as the master and it accepts writes."""

        def promoted() -> bool:
            if self.reported_master() != ("127.0.0.1", self.replica.port):
                return False
            role = self.client(self.replica).execute_command("ROLE")[0]
            return bool(role in (b"master", "master"))

        _wait(promoted, timeout, "the replica was not promoted")

    def stop(self) -> None:
        for server in [*self.sentinels, self.replica, self.master]:
            server.stop()


def start_sentinel_topology(directory: Path) -> SentinelTopology:
    """Start the master, the replica and three sentinels; wait until all know each other."""
    started: list[RedisServer] = []
    try:
        master = RedisServer(directory / "master").start()
        started.append(master)
        replica = RedisServer(
            directory / "replica", extra_config=[f"replicaof 127.0.0.1 {master.port}"]
        ).start()
        started.append(replica)
        sentinels = []
        for index in range(3):
            sentinel = RedisServer(
                directory / f"sentinel{index}",
                sentinel=True,
                extra_config=[
                    f"sentinel monitor {SERVICE} 127.0.0.1 {master.port} 2",
                    f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
                    f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
                    f"sentinel parallel-syncs {SERVICE} 1",
                ],
            ).start()
            started.append(sentinel)
            sentinels.append(sentinel)
        topology = SentinelTopology(master, replica, sentinels)
        _wait(lambda: _linked(topology), STARTUP_TIMEOUT, "the topology did not form")
        return topology
    except BaseException:
        for server in started:
            server.stop()
        raise


def _linked(topology: SentinelTopology) -> bool:
    info = topology.client(topology.replica).info("replication")
    if info.get("master_link_status") != "up":
        return False
    for sentinel in topology.sentinels:
        state = topology.client(sentinel).sentinel_master(topology.service)
        if int(state.get("num-other-sentinels", 0)) < 2 or int(state.get("num-slaves", 0)) < 1:
            return False
    return True


def _wait(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout}s")
        time.sleep(_POLL)
