"""Prompt acknowledgements on the socket between Spark's JVM and a Python worker.

The JVM talks to each Python worker over a loopback TCP socket and sets no TCP_NODELAY
on its end (none in Spark 4.3's PythonWorkerFactory or its runners). A task's exchange
is a request and a reply: the JVM writes the task (~5 KB), then the stage's input as a
second write. Nagle's algorithm holds that second write until the first is
acknowledged, and the worker's kernel, seeing a request/reply pattern, delays its
acknowledgement (Linux: 40 ms at least): every task of a Python stage waited ~40 ms for
its own input (a bare mapInArrow job 113-126 ms against 56-57 with the fix, local[2],
2026-12-06; docs/performance.md, "The 40 ms in every Python stage"). The cure on the
worker's side: TCP_QUICKACK (acknowledge at once; Linux clears it as the connection
goes on, so it is set before each task) and TCP_NODELAY for what the worker writes. A
Unix domain socket has neither option and needs neither.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from types import ModuleType
from typing import Any

_TCP = (socket.AF_INET, socket.AF_INET6)
_PROMPT = tuple(getattr(socket, n) for n in ("TCP_NODELAY", "TCP_QUICKACK") if hasattr(socket, n))


def prompt(sock: socket.socket) -> None:
    """Set ``sock`` to send at once and acknowledge at once (a TCP socket; else nothing)."""
    if sock.family not in _TCP:
        return
    for option in _PROMPT:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, option, 1)
        except OSError:  # pragma: no cover - a socket closed under us: the task sees it
            return


def prompted(worker: Callable[..., Any]) -> Callable[..., Any]:
    """``worker`` (``pyspark.daemon.worker(sock, ...)``, called once per task of a
    reused worker), its socket made prompt first."""

    def run(sock: socket.socket, *args: Any, **kwargs: Any) -> Any:
        prompt(sock)
        return worker(sock, *args, **kwargs)

    run.__wrapped__ = worker  # type: ignore[attr-defined]
    return run


def install_prompt(daemon_module: ModuleType) -> bool:
    """Wrap ``daemon_module.worker`` (``pyspark.daemon``) once; False if it has none."""
    worker = getattr(daemon_module, "worker", None)
    if worker is None or hasattr(worker, "__wrapped__"):
        return False
    daemon_module.worker = prompted(worker)  # type: ignore[attr-defined]
    return True
