"""Task metrics that reach the driver whether or not Spark read a task's output to its end.

A Python worker sends its accumulator updates to the driver after its task's output
iterator is exhausted. When Spark stops reading a task's output early (``show()``,
``limit()``, ``take()``), those updates are never read (the worker's output is closed,
or the worker killed), and the task's metrics are lost. So the driver also runs a small
inbox (a TCP server on the driver's host, loopback in local mode, answering only those
who send its token), and each task run reports to it, before it hands Spark an output
batch, a snapshot of its metrics so far (at most every :data:`EVERY` seconds, and before
its first batch), and its final numbers when its output iterator is closed early
(``GeneratorExit``). The inbox keeps each run's latest snapshot as *pending* until the
run's accumulator update reaches the driver (it carries the run's id, and the driver's
merge retires the snapshot), so a run is never counted twice; the snapshot of a run
whose update Spark never read (it stopped reading the output first) stays, and
:func:`~enrich.spark.metrics.accumulator.statistics` adds it. Each message is
acknowledged before the worker goes on, so a batch Spark received was reported first.
A worker process keeps its connection to the inbox from task to task (one thread of the
driver's per worker process while it reports; either end drops a channel left idle, see
:data:`_IDLE`): a connection per message cost a connect and a driver thread's start
twice a task (median 1 ms a message in a local Spark, 4 ms at the 90th percentile, on
the path of every task's first batch; 0.3 / 1.4-1.9 ms on a kept channel).

Best effort: a worker that cannot reach the inbox goes on without it (its metrics then
arrive by the accumulator alone, as before).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import secrets
import socket
import socketserver
import struct
import threading
import time
import uuid
from typing import Any

from ...engine.records.call_metrics import JoinMetrics

log = logging.getLogger("enrich.spark")

EVERY = 0.5  # seconds between two snapshots of one run (its first batch always reports)
_TIMEOUT = 5.0  # seconds a worker waits for the inbox before going on without it
# A channel idle this long is not used again (a connection quiet for minutes may have
# been dropped on the way without either end knowing); the driver closes its end of one
# idle twice as long, so no channel outlives its use.
_IDLE = 30.0
_HEADER = struct.Struct("!I")

Update = dict[tuple[str, "str | None", "int | None"], JoinMetrics]


class _Handler(socketserver.StreamRequestHandler):
    """One worker process's channel: its token, then frames (a length and a pickled
    ``(run, update)``), each answered with one byte once stored, until it closes."""

    server: _Server
    timeout = 2 * _IDLE  # an idle channel's thread ends

    def handle(self) -> None:
        try:
            token = self.rfile.read(len(self.server.token))
            if not secrets.compare_digest(token, self.server.token):
                return  # not ours: nothing is read past the token
            _prompt(self.connection)
            self.server.opened(self.connection)
            while True:
                header = self.rfile.read(_HEADER.size)
                if len(header) < _HEADER.size:
                    return  # the worker closed its channel (it ended)
                (size,) = _HEADER.unpack(header)
                body = self.rfile.read(size)
                if len(body) < size:
                    return
                run, update = pickle.loads(body)
                self.server.inbox.receive(run, update)
                self.wfile.write(b"\x01")
        except OSError:
            return  # silent, idle, reset (the worker went away mid-frame), or closing
        finally:
            self.server.closed(self.connection)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, inbox: Inbox) -> None:
        super().__init__((host, 0), _Handler)
        self.token = secrets.token_bytes(16)
        self.inbox = inbox
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def opened(self, connection: socket.socket) -> None:
        with self._open_lock:
            self._open.add(connection)

    def closed(self, connection: socket.socket) -> None:
        with self._open_lock:
            self._open.discard(connection)

    def server_close(self) -> None:
        super().server_close()
        with self._open_lock:  # wake the channels' threads: their reads end
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)


class Inbox:
    """The driver's inbox of task runs' metrics snapshots (see the module docstring)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, Update] = {}
        self._server = _Server(host, self)
        thread = threading.Thread(
            target=self._server.serve_forever, name="enrich-metrics-inbox", daemon=True
        )
        thread.start()

    @property
    def address(self) -> tuple[str, int, bytes]:
        host, port = self._server.server_address[:2]
        return str(host), int(port), self._server.token

    def receive(self, run: str, update: Update) -> None:
        """The latest numbers of ``run``: pending until :meth:`retire`."""
        with self._lock:
            self._pending[run] = update

    def retire(self, runs: frozenset[str]) -> None:
        """These runs' accumulator updates arrived: their snapshots are counted there."""
        with self._lock:
            for run in runs:
                self._pending.pop(run, None)

    def pending(self) -> list[Update]:
        """The latest snapshots of the runs that did not end normally (yet)."""
        with self._lock:
            return list(self._pending.values())

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Reporter:
    """What a task's run reports through: its accumulator (the run's final update, as
    Spark sends it) and the driver's inbox (snapshots while it runs). Picklable; the
    inbox's token never appears in its repr."""

    def __init__(self, accumulator: Any, address: tuple[str, int, bytes] | None) -> None:
        self.accumulator = accumulator
        self.address = address

    def __repr__(self) -> str:
        return f"Reporter({self.accumulator!r})"

    def add(self, update: Update) -> None:
        """Accumulator-compatible: the run's final update (``Accumulator.add``)."""
        self.accumulator.add(update)

    def run(self) -> RunReport:
        """A reporter for one task run."""
        return RunReport(self)


class RunReport:
    """One task run's reports: :meth:`progress` before each output batch, :meth:`done`
    with its final update at its normal end."""

    def __init__(self, reporter: Reporter) -> None:
        self._reporter = reporter
        self._id = uuid.uuid4().hex
        self._sent = float("-inf")
        self._usable = reporter.address is not None
        self._stored = False  # a snapshot of this run may be pending at the driver

    def progress(self, update: Update) -> None:
        """Send a snapshot if :data:`EVERY` seconds passed since the last (or none was)."""
        now = time.monotonic()
        if self._usable and now - self._sent >= EVERY:
            self._sent = now
            self._send(update)

    def stopped(self, update: Update) -> None:
        """Spark stopped reading the run's output (it closed the iterator): no
        accumulator update of this task will reach the driver, so the run's final
        numbers stay there as its snapshot."""
        if self._usable:
            self._send(update)

    def done(self, update: Update) -> None:
        """The run ended normally: its accumulator update, marked with the run's id,
        replaces its snapshot when (and only if) it reaches the driver: Spark reads a
        worker's updates only after the whole output, which it may not read."""
        marked: dict[Any, JoinMetrics] = dict(update)
        if self._usable:  # the final numbers wait there, in case it is never read
            self._send(update)
        if self._stored:  # retires it, whichever of its snapshots arrived
            marked[("", self._id, None)] = JoinMetrics()
        self._reporter.add(marked)

    def _send(self, update: Update) -> None:
        assert self._reporter.address is not None
        body = pickle.dumps((self._id, update))
        self._stored = True  # from here on it may arrive, even if the answer does not
        try:
            _deliver(self._reporter.address, _HEADER.pack(len(body)) + body)
        except OSError:
            self._usable = False  # best effort: the accumulator alone, as before
            log.debug("the driver's metrics inbox is unreachable", exc_info=True)


# A worker process's channels to the inboxes it reports to, kept from task to task (a
# connection per message cost a connect, and a thread started in the driver, each time):
# by inbox address, for the process that opened them (a forked child opens its own).
_channels: dict[tuple[str, int, bytes], tuple[socket.socket, float]] = {}
_channels_pid = os.getpid()
_channels_lock = threading.Lock()


def _deliver(address: tuple[str, int, bytes], frame: bytes) -> None:
    """Send ``frame`` on this process's channel to ``address`` and wait for its answer;
    once more on a new channel if the kept one is gone (the answer to a frame that did
    arrive may be what was lost: storing a run's update twice is harmless)."""
    global _channels_pid
    with _channels_lock:
        if _channels_pid != os.getpid():  # a forked child: the parent's are not its own
            for inherited, _ in _channels.values():
                inherited.close()  # this process's descriptor only: the parent's stays
            _channels.clear()
            _channels_pid = os.getpid()
        kept = _channels.pop(address, None)
        if kept is not None:
            sock, used = kept
            if time.monotonic() - used <= _IDLE and _exchange(sock, frame):
                _channels[address] = (sock, time.monotonic())
                return
            sock.close()  # idle too long, or gone: a new one
        sock = _connect(address)
        try:
            sock.sendall(frame)
            if sock.recv(1) != b"\x01":
                raise ConnectionError("the metrics inbox closed the channel")
        except OSError:
            sock.close()
            raise
        _channels[address] = (sock, time.monotonic())


def _exchange(sock: socket.socket, frame: bytes) -> bool:
    """Whether ``frame`` went out on a kept channel and was answered."""
    try:
        sock.sendall(frame)
        return sock.recv(1) == b"\x01"
    except OSError:
        return False


def _connect(address: tuple[str, int, bytes]) -> socket.socket:
    host, port, token = address
    sock = socket.create_connection((host, port), timeout=_TIMEOUT)
    try:
        _prompt(sock)
        sock.sendall(token)
    except OSError:
        sock.close()
        raise
    return sock


def _prompt(sock: socket.socket) -> None:
    """Each frame and answer is one small write, waited for: send it at once."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


_inbox: Inbox | None = None
_inbox_lock = threading.Lock()


def inbox_for(context: Any) -> Inbox | None:
    """The driver's inbox (started on first use), bound to loopback under a local
    master, else to ``spark.driver.host``; None if it cannot start."""
    global _inbox
    with _inbox_lock:
        if _inbox is None:
            try:
                master = str(context.master or "")
                host = "127.0.0.1"
                if not master.startswith("local"):
                    host = context.getConf().get("spark.driver.host", "0.0.0.0")
                _inbox = Inbox(host)
            except Exception:  # a driver without sockets: the accumulators alone
                log.warning("the metrics inbox did not start", exc_info=True)
                return None
        return _inbox


def retire(runs: frozenset[str]) -> bool:
    """On the driver (where the inbox runs): retire the snapshots of ``runs``; whether
    this is the driver."""
    if _inbox is None:
        return False
    _inbox.retire(runs)
    return True


def pending(name: str) -> list[tuple[tuple[str, str | None, int | None], JoinMetrics]]:
    """The pending snapshots' metrics of join or map ``name``, by (name, query, batch)."""
    if _inbox is None:
        return []
    return [(key, m) for update in _inbox.pending() for key, m in update.items() if key[0] == name]
