"""Spark's Python workers forked from ``enrich.spark.session``'s daemon: the session helper
sets it on a local master, the workers it forks have this package imported before their
first batch, what they compute is right (Arrow, asyncio, an ``async_map`` against a
real HTTP service), and their socket to the JVM sends and acknowledges at once (on real
loopback sockets, and on each worker's connection in a local Spark)."""

from __future__ import annotations

import importlib
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

import enrich.spark
from enrich.spark import async_map
from tests.spark.functions import Lookup
from tests.support.http_server import HttpTestServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

# The daemon's module. ``enrich.spark.session`` is the package's function: looked up
# through the package first (importing the submodule directly before that would bind
# the module over the name).
assert callable(enrich.spark.session)
daemon_module = sys.modules["enrich.spark.session"]
worker_socket = importlib.import_module("enrich.spark.session.worker_socket")


def _marked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each row with what the worker knows: forked from our daemon (its module's marker,
    read without importing it: a worker of pyspark.daemon has not imported it), the
    modules the daemon imported, and Arrow and asyncio work done after the fork."""
    import asyncio

    import pyarrow.compute as pc

    daemon = sys.modules.get("enrich.spark.session")
    warm = bool(daemon is not None and daemon.WARM)
    preloaded = daemon is not None and "enrich.spark.join.join_batches" in daemon.LOADED

    async def doubled(values: list[int]) -> list[int]:
        async def one(v: int) -> int:
            await asyncio.sleep(0)
            return 2 * v

        return list(await asyncio.gather(*(one(v) for v in values)))

    for batch in batches:
        n = batch.num_rows
        ids = batch.column("n")
        yield pa.RecordBatch.from_arrays(
            [
                *batch.columns,
                pc.multiply(ids, 3),
                pa.array(asyncio.run(doubled(ids.to_pylist())), pa.int64()),
                pa.array([warm] * n),
                pa.array([preloaded] * n),
                pa.array([os.getpid()] * n, pa.int64()),
            ],
            names=[*batch.schema.names, "tripled", "doubled", "warm", "preloaded", "pid"],
        )


def test_workers_come_from_the_warm_daemon_and_compute_right(
    spark: SparkSession, http_server: HttpTestServer
) -> None:
    daemon = spark.sparkContext.getConf().get("spark.python.daemon.module")
    assert daemon == "enrich.spark.session"
    http_server.data.update({f"u{i}": {"name": f"user {i}", "age": i} for i in range(40)})
    df = spark.createDataFrame([(i, f"u{i}") for i in range(40)], "n long, key string")
    mapped = async_map(df.repartition(2), Lookup(f"http://127.0.0.1:{http_server.port}/users"),
                       "name string, age int", name="warm_daemon_map")  # fmt: skip
    schema = (
        "n long, key string, name string, age int, tripled long, doubled long, "
        "warm boolean, preloaded boolean, pid long"
    )
    rows = mapped.mapInArrow(_marked, schema).collect()
    assert sorted((r.n, r.key, r.name, r.age, r.tripled, r.doubled) for r in rows) == [
        (i, f"u{i}", f"user {i}", i, 3 * i, 2 * i) for i in range(40)
    ]
    assert all(r.warm and r.preloaded for r in rows), {(r.pid, r.warm) for r in rows}
    assert os.getpid() not in {r.pid for r in rows}


@pytest.mark.parametrize(
    ("master", "local"),
    [(None, True), ("local", True), ("local[2]", True), ("local[*]", True),
     ("local-cluster[2,1,1024]", False), ("yarn", False), ("spark://h:7077", False)],
)  # fmt: skip
def test_the_session_helper_warms_local_masters_only(master: Any, local: bool) -> None:
    # On a cluster the daemon needs the package installed on the executors, not only
    # shipped with --py-files (which reaches the workers, not the daemon): opt-in there.
    assert daemon_module.is_local(master) is local


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

    fake = types.ModuleType("fake_daemon")
    fake.worker = worker  # type: ignore[attr-defined]
    assert worker_socket.install_prompt(fake) is True
    assert worker_socket.install_prompt(fake) is False  # already wrapped: not twice
    _, sock = pair
    assert fake.worker(sock, True) == 7  # type: ignore[attr-defined]
    assert calls == [(sock, True, calls[0][2])] and calls[0][2] != 0
    assert worker_socket.install_prompt(types.ModuleType("no_worker")) is False


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
