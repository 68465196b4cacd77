"""Local services for the demo and the benchmarks: a throwaway Redis and a dimension
HTTP service, each in a process of its own on a free loopback port.

Not for production: these exist so that one command can show the library end to end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

# Re-exported: the demo's callers and the tests' fixtures find the binary through here.
from .redis_binary import (
    describe,
    embedded_redis_binary as embedded_redis_binary,
    redis_binary as redis_binary,
)

if TYPE_CHECKING:
    pass

STARTUP_TIMEOUT = 20.0

# Called with one line once a service listens: what it is, which program, its pid and port
# (``enrich demo`` prints it: users see which Redis runs, tests know which pid to await).
Announce = Callable[[str], None]


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (never Redis's default 6379)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port != 6379:
            return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} while starting")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    process.kill()
    raise RuntimeError(f"{what} did not listen on port {port} within {STARTUP_TIMEOUT:g}s")


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _serving(
    command: list[str], port: int, what: str, shown: str, announce: Announce | None
) -> Iterator[None]:
    """Run ``command`` until the block ends, once it listens on ``port``; the process has
    ended (and been waited for) when the block is left."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        # Ctrl-C reaches the whole process group: the services ignore it, so that they
        # outlive the demo's clean stop and are ended here, in order (as pyspark does
        # for its JVM).
        preexec_fn=_ignore_sigint if os.name == "posix" else None,
    )
    try:
        _wait_for_port(port, process, what)
        if announce is not None:
            announce(f"started {what}: {shown}, pid {process.pid}, port {port}")
        yield
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def local_redis(port: int | None = None, announce: Announce | None = None) -> Iterator[str]:
    """Run a private redis-server (on ``port``, or a free one); yields its URL
    (redis://127.0.0.1:PORT/0). ``announce`` gets a line naming the binary and its pid."""
    port = port or free_port()
    binary = redis_binary()
    with tempfile.TemporaryDirectory(prefix="enrich-redis-") as directory:
        command = [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
            "--logfile",
            "",
        ]
        with _serving(command, port, "redis-server", describe(binary), announce):
            yield f"redis://127.0.0.1:{port}/0"


@contextlib.contextmanager
def dimension_service(
    latency: float = 0.0,
    users: int = 100_000,
    slow_every: int = 0,
    slow_latency: float = 0.0,
    port: int | None = None,
    quota: float = 0.0,
    knee: int = 0,
    announce: Announce | None = None,
    slow_fraction: float = 0.0,
) -> Iterator[str]:
    """Run the demo dimension service (on ``port``, or a free one); yields its base URL
    (http://127.0.0.1:PORT). With ``slow_every``, ids divisible by it answer after
    ``slow_latency`` seconds; with ``slow_fraction``, that share of ids and scored bodies
    (chosen by a hash) does; ``quota`` (requests/s, then 429) and ``knee`` (requests in
    flight, then slower) model a loaded service (see enrich.demo.dimension_service).
    ``announce`` gets a line naming its pid."""
    port = port or free_port()
    command = [
        sys.executable,
        "-m",
        "enrich.demo.dimension_service",
        "--port",
        str(port),
        "--latency",
        str(latency),
        "--users",
        str(users),
        "--slow-every",
        str(slow_every),
        "--slow-latency",
        str(slow_latency),
        "--slow-fraction",
        str(slow_fraction),
        "--quota",
        str(quota),
        "--knee",
        str(knee),
    ]
    shown = f"{sys.executable} -m enrich.demo.dimension_service"
    with _serving(command, port, "the dimension service", shown, announce):
        yield f"http://127.0.0.1:{port}"


# The demo's data set, shared by `enrich demo`, `enrich dim-server` and examples/.
DEMO_USERS = 1_000  # users 0..999 exist, in Redis (JSON) and in the HTTP service
BROKEN_USER = 13  # its Redis value is not JSON: the row shows the error policy at work
DIM_REDIS_PORT = 16379  # `enrich dim-server`'s fixed ports, the ones examples/ name
DIM_HTTP_PORT = 18080


def seed_redis(url: str, users: int = DEMO_USERS) -> None:
    """Write ``user:<id>`` JSON documents for ids below ``users``, one of them broken."""
    import redis

    from .dimension_service import user

    client = redis.Redis.from_url(url)
    try:
        client.mset({f"user:{i}": json.dumps(user(i)) for i in range(users)})
        client.set(f"user:{BROKEN_USER}", "{not json")
    finally:
        client.close()


@contextlib.contextmanager
def demo_services(
    latency: float = 0.005,
    redis_port: int | None = None,
    http_port: int | None = None,
    announce: Announce | None = None,
) -> Iterator[tuple[str, str]]:
    """The demo's Redis (seeded) and HTTP dimension service; yields their URLs.

    ``ENRICH_REDIS_URL`` / ``ENRICH_DIMENSION_URL``, when set (docker compose sets them),
    name services to use instead of starting private ones. ``announce`` gets one line per
    service started (its program and pid); both have ended when the block is left.
    """
    with contextlib.ExitStack() as stack:
        url = os.environ.get("ENRICH_REDIS_URL") or stack.enter_context(
            local_redis(redis_port, announce)
        )
        base = os.environ.get("ENRICH_DIMENSION_URL") or stack.enter_context(
            dimension_service(latency=latency, users=DEMO_USERS, port=http_port, announce=announce)
        )
        seed_redis(url)
        yield url, base
