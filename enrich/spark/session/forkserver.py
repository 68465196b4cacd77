"""Spark's Python processes forked from one warm interpreter, on a local master.

A cold streaming query on a local master waits for Spark to start, one after another,
six Python interpreters: the driver-side planners of a Python source and sink (each a
``pyspark.daemon`` of its own, one per worker module), the source's runner, the
executors' daemon and the sink's commit runner. Each is a fresh interpreter importing
pyspark and then the source's or the sink's module: 0.9-1.6 s each on a quiet 2-core
machine, ~6 of the 9 s from ``start()`` to the first row (docs/performance.md, "Where a
cold query's first seconds go").

This module is a fork server for them. :func:`start` runs it beside the driver (``python
-m enrich.spark.session.forkserver``), where it imports pyspark, its worker and planner modules
and this package once, and writes a *launcher*: a two-line executable that Spark runs as
its Python (``SparkContext.pythonExec``). The launcher, an interpreter started without
``site`` (~15 ms), hands the server its argument vector, environment, working directory
and its standard input, output and error (``SCM_RIGHTS``); the server forks a child that
takes them over, joins the launcher's process group (a terminal's Ctrl-C reaches it as it
would have reached the interpreter) and runs the module as ``python -m`` would; the
launcher passes ``SIGTERM`` (Spark's ``destroy()``) on and exits with the child's status,
or dies of its signal. Spark sees a process that behaves as the interpreter it started.

What cannot be forked falls back to the interpreter itself (``exec``, the launcher's
arguments unchanged): anything but ``-m MODULE``, an interpreter setting fixed at start
that differs from the server's (``PYTHONHASHSEED``, ...), a server gone or refusing.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import runpy
import selectors
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, NoReturn

# What a child inherits already imported: every module a driver-side planner, a runner
# or the executors' daemon starts with (pyspark 4.1-4.3 names; one not present is
# skipped), and what the warm daemon preloads (enrich.spark.session.preload.PRELOAD).
SPARK_MODULES: tuple[str, ...] = (
    "pyspark",
    "pyspark.daemon",
    "pyspark.worker",
    "pyspark.worker_util",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.lookup_data_sources",
    "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.worker.write_into_data_source",
    "pyspark.sql.worker.commit_data_source_write",
    "pyspark.sql.worker.python_streaming_sink_runner",
    "pyspark.sql.streaming.python_streaming_source_runner",
    "enrich.spark.session",
    "enrich.spark.streams.stream_source",
)

# Settings an interpreter reads once, at its start: a child whose environment asks for
# another value than the server started with runs as its own interpreter instead.
# PYTHONPATH is applied to the child's sys.path; PYTHONUNBUFFERED to its streams.
FIXED_AT_START = ("PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONDONTWRITEBYTECODE",
                  "PYTHONFAULTHANDLER", "PYTHONDEVMODE", "PYTHONWARNINGS", "PYTHONUTF8",
                  "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONHOME")  # fmt: skip

_LAUNCHER = """\
import os, signal, socket, struct, sys
PATH, PYTHON = {path!r}, {python!r}
args = sys.argv[1:]

def run_here():
    os.execv(PYTHON, [PYTHON, *args])

def read(server, n):
    got = b""
    while len(got) < n:
        part = server.recv(n - len(got))
        if not part:
            raise EOFError
        got += part
    return got

def fork_there():
    # (the server's connection, the child's pid), or None: not forked
    if len(args) < 2 or args[0] != "-m":
        return None
    try:
        import json
        ask = json.dumps({{"argv": args, "env": dict(os.environ), "cwd": os.getcwd(),
                          "pgid": os.getpgrp()}}).encode()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.connect(PATH)
        socket.send_fds(server, [b"!"], [0, 1, 2])
        server.sendall(struct.pack("!I", len(ask)) + ask)
        pid = struct.unpack("!i", read(server, 4))[0]
    except Exception:
        return None
    return (server, pid) if pid > 0 else None

def outlive(pid):
    # the server went away first: wait for the child's end (its status went with it)
    try:
        import select
        select.select([os.pidfd_open(pid)], [], [])
    except Exception:
        return 70
    return 1

forked = fork_there()
if forked is None:
    run_here()
server, pid = forked

def forward(signum, frame):
    try:
        os.kill(pid, signum)
    except OSError:
        pass

signal.signal(signal.SIGTERM, forward)
for name in ("SIGINT", "SIGHUP", "SIGQUIT"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
try:
    code = struct.unpack("!i", read(server, 4))[0]
except (OSError, EOFError):
    code = outlive(pid)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code & 0xFF)
"""


def launcher_text(path: str, python: str) -> str:
    """The launcher's Python source (run with ``-I -S``)."""
    return _LAUNCHER.format(path=path, python=python)


# -- the driver's side -----------------------------------------------------------------

# True in a process forked by a fork server (what a test reads in Spark's processes).
FORKED = False


class ForkServer:
    """A fork server beside this driver: its launcher (what Spark runs as Python) and
    its process."""

    def __init__(self, folder: Path, process: subprocess.Popen[bytes]) -> None:
        self.folder = folder
        self.launcher = str(folder / "python")
        self.process = process

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """Stop taking new processes; the server ends once those it forked have ended
        (Spark's processes run on, as Spark leaves them)."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()


def start(python: str = sys.executable) -> ForkServer | None:
    """Start a fork server beside this driver; None where one cannot run (no fork, no
    ``SCM_RIGHTS``, a temporary folder mounted ``noexec`` or whose path is too long for
    a Unix socket).

    The server ends when this process's end of its standard input closes (this process
    exits, or :meth:`ForkServer.stop`) and the processes it forked have ended. Until
    it listens, and after it ends, a launcher runs ``python`` itself.
    """
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        return None
    folder = Path(tempfile.mkdtemp(prefix="enrich-fork-"))
    sock = folder / "s"
    noexec = os.statvfs(folder).f_flag & getattr(os, "ST_NOEXEC", 0)
    if noexec or len(os.fsencode(sock)) > 100:  # a launcher must run; sun_path: 108 bytes
        folder.rmdir()
        return None
    (folder / "launch.py").write_text(launcher_text(str(sock), python))
    script = folder / "python"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(python)} -I -S "
                      f"{shlex.quote(str(folder / 'launch.py'))} \"$@\"\n")  # fmt: skip
    script.chmod(0o755)
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")  # what Spark gives its workers when unset
    env["PYTHONUNBUFFERED"] = "YES"  # what Spark gives every Python process
    process = subprocess.Popen(
        [python, "-m", "enrich.spark.session.forkserver", str(sock)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, cwd=os.getcwd(),
    )  # fmt: skip
    return ForkServer(folder, process)


# -- the server --------------------------------------------------------------------------


def _preload() -> None:
    from .preload import PRELOAD, preload

    preload(SPARK_MODULES + PRELOAD)
    # Importing this package bound it over the ``enrich.spark`` package's lazy ``session``
    # function: put the function back for the children.
    vars(sys.modules["enrich.spark"]).pop("session", None)
    gc.collect()
    gc.freeze()  # a child's collections skip what it inherited (see enrich.spark.session)


def _read(conn: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        part = conn.recv(n - len(got))
        if not part:
            raise ConnectionError("the launcher hung up")
        got += part
    return got


def _forkable(ask: dict[str, Any], started: dict[str, str]) -> bool:
    argv, env = ask["argv"], ask["env"]
    if len(argv) < 2 or argv[0] != "-m":
        return False
    return all(env.get(key) == started.get(key) for key in FIXED_AT_START)


def _become(ask: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the child: take over the launcher's streams, directory and environment, then
    run its module as ``python -m`` does, and exit with its status."""
    global FORKED
    code = 1
    try:
        with contextlib.suppress(OSError):  # a terminal's Ctrl-C reaches it as before
            os.setpgid(0, ask["pgid"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            if fd > 2:
                os.close(fd)
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter
        os.chdir(ask["cwd"])
        os.environ.clear()
        os.environ.update(ask["env"])
        # sys.path as `python -m` builds it: the directory, PYTHONPATH, then the rest
        extra = [p for p in ask["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        rest = [p for p in sys.path[1:] if p not in extra]
        sys.path[:] = [ask["cwd"], *dict.fromkeys(extra), *rest]
        argv = ask["argv"]
        sys.argv = [argv[1], *argv[2:]]
        FORKED = True
        # runpy warns that the module was imported before it ran as __main__: preloaded
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            code = done.code or 0
        else:
            print(done.code, file=sys.stderr)
    except BaseException as error:
        import traceback

        traceback.print_exc()
        if isinstance(error, KeyboardInterrupt):  # Python dies of the signal unhandled
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


class _Server:
    def __init__(self, path: str) -> None:
        self.path = path
        self.started = {k: v for k, v in os.environ.items() if k in FIXED_AT_START}
        self.children: dict[int, socket.socket] = {}  # pid -> its launcher's connection
        self.select = selectors.DefaultSelector()
        self.listener: socket.socket | None = None
        self.wake_r, self.wake_w = os.pipe()

    def serve(self) -> None:
        # In the driver's process group: a terminal's Ctrl-C or hang-up is the driver's
        # to act on (the server ends after it, its standard input closed).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _preload()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop through the pipe
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.select.register(self.listener, selectors.EVENT_READ, "accept")
        self.select.register(sys.stdin.fileno(), selectors.EVENT_READ, "driver")
        self.select.register(self.wake_r, selectors.EVENT_READ, "child")
        try:
            while self.listener is not None or self.children:
                for key, _ in self.select.select():
                    self._on(key.data)
        finally:
            self._close_listener()
        # Ended as asked (the driver gone): the launcher goes too. A server that failed
        # leaves it, running Python itself, for the SparkContext that still names it.
        folder = os.path.dirname(self.path)
        for name in ("launch.py", "python"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))
        with contextlib.suppress(OSError):
            os.rmdir(folder)

    def _on(self, what: Any) -> None:
        if what == "driver":
            if not os.read(sys.stdin.fileno(), 4096):  # the driver is gone or stopped us
                self.select.unregister(sys.stdin.fileno())
                self._close_listener()
        elif what == "child":
            os.read(self.wake_r, 4096)
            self._reap()
        elif what == "accept" and self.listener is not None:
            self._spawn(self.listener.accept()[0])
        elif isinstance(what, int):  # a launcher hung up: its child goes with it
            launcher = self.children.get(what)
            if launcher is not None and not launcher.recv(1):
                self.select.unregister(launcher)
                with contextlib.suppress(OSError):
                    os.kill(what, signal.SIGTERM)

    def _close_listener(self) -> None:
        if self.listener is None:
            return
        self.select.unregister(self.listener)
        self.listener.close()
        self.listener = None
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # launchers from now on run Python themselves

    def _spawn(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            _, fds, _, _ = socket.recv_fds(conn, 1, 3)
            (size,) = struct.unpack("!I", _read(conn, 4))
            ask = json.loads(_read(conn, size))
            if len(fds) != 3 or not _forkable(ask, self.started):
                conn.sendall(struct.pack("!i", -1))  # the launcher runs Python itself
                conn.close()
                return
            pid = os.fork()
            if pid == 0:
                try:  # the child keeps nothing of the server's
                    self.select.close()
                    for mine in (self.listener, conn, *self.children.values()):
                        if mine is not None:
                            mine.close()
                    os.close(self.wake_r)
                    os.close(self.wake_w)
                except BaseException:
                    os._exit(70)  # never back into the server's loop
                _become(ask, fds)
            self.children[pid] = conn
            self.select.register(conn, selectors.EVENT_READ, pid)
            conn.sendall(struct.pack("!i", pid))
        except (OSError, ValueError, ConnectionError):
            if conn.fileno() >= 0 and conn not in self.children.values():
                conn.close()
        finally:
            for fd in fds:
                os.close(fd)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.select.unregister(conn)
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
            conn.close()


def serve(path: str) -> None:
    """Fork Spark's processes for the launchers that connect to ``path``, until this
    process's standard input closes and every child has ended."""
    _Server(path).serve()


if __name__ == "__main__":
    # Run as ``python -m``, this file is ``__main__``: serve from the module a child's
    # code imports, so that its FORKED marker is the one set.
    import importlib

    importlib.import_module("enrich.spark.session.forkserver").serve(sys.argv[1])
