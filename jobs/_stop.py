"""A clean stop: SIGTERM or SIGINT ends a streaming job at a micro-batch boundary.

While a job waits for its streaming query (:func:`jobs._streams.await_query`),
:func:`stop_signals` turns the first SIGTERM (a service manager, ``kill``) or SIGINT
(Ctrl-C) into a :class:`StopRequest`: the handler only records it, so no call into the
JVM is cut in the middle. The waiting job then lets the micro-batch in progress run to
its end (its rows written, the sink's commit done and Spark's commit log written) and
stops the query; the job ends as after ``--duration``: its metrics summary, Spark
stopped, exit code 0.

What a restart finds: every micro-batch Spark logged as committed is in the sink once.
If Spark had already started the next micro-batch when the query stopped, that batch
is cancelled: its offsets are logged without its commit, and the restart runs it again
with the same offsets; the exactly-once sinks (keyed by batch id, or by the source
record under ``latency: low``) count a batch once even if its commit took effect just
before the stop.

A second signal while the job stops does not wait any more: it raises
:class:`KeyboardInterrupt`, and the job stops the query where it is (the sinks'
protocols still keep every record once) and exits 0.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Whether (and by which signal) the job was asked to stop; set once, never cleared."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal_name: str | None = None

    def request(self, signal_name: str) -> None:
        """Record the request (the first one's signal is kept)."""
        if not self._event.is_set():
            self.signal_name = signal_name
            self._event.set()

    def is_requested(self) -> bool:
        return self._event.is_set()


@contextlib.contextmanager
def stop_signals(signals: tuple[signal.Signals, ...] = SIGNALS) -> Iterator[StopRequest]:
    """Within: the first of ``signals`` sets the yielded :class:`StopRequest`; a second
    raises :class:`KeyboardInterrupt`. The handlers before are restored on the way out.
    Outside the main thread (where Python cannot take signals) the request is never set
    and nothing is installed."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handle(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if request.is_requested():
            raise KeyboardInterrupt
        request.request(name)  # no logging here: the main thread may hold its lock

    before = {s: signal.signal(s, handle) for s in signals}
    try:
        yield request
    finally:
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
