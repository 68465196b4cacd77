"""The socket between Spark's JVM and a Python worker forked from ``enrich.spark.session``'s
daemon sends and acknowledges at once (``enrich.spark.worker_socket``): on real loopback
sockets, and in the workers of a local Spark."""

from __future__ import annotations

import os
import socket
import stat
import sys
import types
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from enrich.spark import worker_socket


def _option(sock: socket.socket, name: str) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, name))


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair of loopback TCP sockets (the JVM's end, the worker's end)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    with client, accepted:
        yield client, accepted


def test_a_tcp_socket_is_made_to_send_at_once(pair: tuple[socket.socket, socket.socket]) -> None:
    _, sock = pair
    assert _option(sock, "TCP_NODELAY") == 0  # Python's and Linux's default
    worker_socket.prompt(sock)
    assert _option(sock, "TCP_NODELAY") != 0


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")
def test_a_tcp_socket_is_made_to_acknowledge_at_once(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    jvm, sock = pair
    # A request and a reply sent soon after it put the worker's end in delayed-ACK mode
    # (a reply that came late, on a busy machine, would not: exchange until one did).
    for _ in range(50):
        jvm.sendall(b"task")
        assert sock.recv(4) == b"task"
        sock.sendall(b"done")
        assert jvm.recv(4) == b"done"
        if _option(sock, "TCP_QUICKACK") == 0:
            break
    assert _option(sock, "TCP_QUICKACK") == 0  # acknowledgements delayed from now on
    worker_socket.prompt(sock)
    assert _option(sock, "TCP_QUICKACK") != 0


def test_a_unix_socket_is_left_as_it_is() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        worker_socket.prompt(left)  # no TCP options to set; no error


def test_install_wraps_the_daemons_worker_once_and_passes_everything_on(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    calls: list[tuple[Any, ...]] = []

    def worker(sock: socket.socket, authenticated: bool) -> int:
        calls.append((sock, authenticated, _option(sock, "TCP_NODELAY")))
        return 7

    daemon = types.ModuleType("fake_daemon")
    daemon.worker = worker  # type: ignore[attr-defined]
    assert worker_socket.install(daemon) is True
    assert worker_socket.install(daemon) is False  # already wrapped: not twice
    _, sock = pair
    assert daemon.worker(sock, True) == 7  # type: ignore[attr-defined]
    assert calls == [(sock, True, calls[0][2])] and calls[0][2] != 0
    assert worker_socket.install(types.ModuleType("no_worker")) is False


def _jvm_socket_options(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One row a task: the worker's pid and TCP_NODELAY on each TCP socket it holds (the
    connection to the JVM and its duplicates, the only ones in this stage)."""
    import socket as sockets

    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        probe = sockets.socket(fileno=os.dup(fd))
        try:
            if probe.family in (sockets.AF_INET, sockets.AF_INET6):
                found.append(probe.getsockopt(sockets.IPPROTO_TCP, sockets.TCP_NODELAY))
        finally:
            probe.close()
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict(
        {"pid": [os.getpid()], "tcp": [len(found)], "nodelay": [min(found, default=-1)]}
    )


@pytest.mark.spark
@pytest.mark.timeout(180)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_a_warm_workers_connection_to_the_jvm_sends_at_once(spark: SparkSession) -> None:
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "enrich.spark.session"
    if spark.sparkContext.getConf().get("spark.python.unix.domain.socket.enabled") == "true":
        pytest.skip("the workers talk to the JVM over a Unix domain socket")
    df = spark.range(0, 100, 1, 2)
    rows = df.mapInArrow(_jvm_socket_options, "pid long, tcp long, nodelay long").collect()
    assert len(rows) == 2
    assert all(r.tcp >= 1 for r in rows), rows  # the worker's connection to the JVM
    assert all(r.nodelay != 0 for r in rows), rows  # Spark leaves it 0; the daemon sets it
