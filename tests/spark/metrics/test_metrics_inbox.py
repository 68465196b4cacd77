"""The driver's metrics inbox (enrich.spark.metrics.inbox): a run's numbers wait there
until its accumulator update arrives, so a task Spark stopped reading still counts and
a task read to its end counts once. No Spark: a real server on loopback."""

from __future__ import annotations

import os
import pickle
import socket
import time
from typing import Any

import pytest

from enrich.engine.records.call_metrics import JoinMetrics
from enrich.spark.metrics import inbox as inbox_module
from enrich.spark.metrics.accumulator import MetricsParam, Totals
from enrich.spark.metrics.inbox import Inbox, Reporter


class Accumulator:
    """What a worker's accumulator does: merges the updates into its value."""

    def __init__(self) -> None:
        self.value = Totals()

    def add(self, update: Any) -> None:
        self.value = MetricsParam().addInPlace(self.value, update)


def counted(rows: int) -> JoinMetrics:
    metrics = JoinMetrics()
    metrics.rows_in = rows
    return metrics


@pytest.fixture
def inbox(monkeypatch: pytest.MonkeyPatch) -> Any:
    box = Inbox("127.0.0.1")
    yield box
    box.close()


def test_a_run_read_to_its_end_counts_once_and_one_stopped_still_counts(
    inbox: Inbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbox_module, "_inbox", None)  # a worker has no inbox of its own
    # As a worker gets it (pickled), with an accumulator.
    reporter = pickle.loads(pickle.dumps(Reporter(Accumulator(), inbox.address)))
    worker = reporter.accumulator
    read, stopped = reporter.run(), reporter.run()
    read.progress({("m", None, None): counted(4)})
    read.done({("m", None, None): counted(10)})
    stopped.progress({("m", None, None): counted(3)})
    stopped.stopped({("m", None, None): counted(7)})
    assert sorted(m.rows_in for u in inbox.pending() for m in u.values()) == [7, 10]
    # The driver merges the worker's update (carrying the finished run's id): that run's
    # numbers leave the inbox; the stopped run's stay (its update is never read).
    monkeypatch.setattr(inbox_module, "_inbox", inbox)
    driver = MetricsParam().addInPlace(Totals(), worker.value)
    assert driver.joins["m"].rows_in == 10 and not driver.runs
    assert [(k, m.rows_in) for k, m in inbox_module.pending("m")] == [(("m", None, None), 7)]


def test_only_the_token_is_heard_and_it_never_shows(inbox: Inbox) -> None:
    host, port, token = inbox.address
    body = pickle.dumps(("intruder", {("m", None, None): counted(1)}))
    with socket.create_connection((host, port)) as sock:
        sock.sendall(b"x" * len(token) + len(body).to_bytes(4, "big") + body)
        assert sock.recv(1) == b""  # closed without an answer
    assert inbox.pending() == []
    assert token.hex() not in repr(Reporter(None, inbox.address))


def test_an_unreachable_inbox_leaves_the_accumulator_alone() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    worker = Accumulator()
    run = Reporter(worker, ("127.0.0.1", port, b"t" * 16)).run()
    run.progress({("m", None, None): counted(2)})
    run.done({("m", None, None): counted(5)})
    assert worker.value.joins["m"].rows_in == 5


def test_a_worker_keeps_one_channel_and_replaces_a_lost_one(
    inbox: Inbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbox_module, "_inbox", None)
    reporter = pickle.loads(pickle.dumps(Reporter(Accumulator(), inbox.address)))
    first, second = reporter.run(), reporter.run()  # two tasks of one worker process
    first.progress({("m", None, None): counted(1)})
    first.done({("m", None, None): counted(2)})
    second.progress({("m", None, None): counted(3)})
    assert len(inbox._server._open) == 1  # one connection carried the three messages
    # The driver's end of it goes away (as when the connection drops): the next
    # message goes on a new one and arrives.
    for connection in list(inbox._server._open):
        connection.shutdown(socket.SHUT_RDWR)
    second.done({("m", None, None): counted(4)})
    assert sorted(m.rows_in for u in inbox.pending() for m in u.values()) == [2, 4]
    assert reporter.accumulator.value.joins["m"].rows_in == 6


def test_a_forked_worker_reports_on_a_channel_of_its_own(
    inbox: Inbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbox_module, "_inbox", None)
    reporter = Reporter(Accumulator(), inbox.address)
    reporter.run().progress({("m", None, None): counted(1)})  # the parent's channel
    pid = os.fork()  # as Spark's daemon forks a worker
    if pid == 0:  # pragma: no cover - the child's result is its exit status
        run = reporter.run()
        run.progress({("m", None, None): counted(2)})
        os._exit(0 if run._usable else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    reporter.run().progress({("m", None, None): counted(3)})  # the parent's, still open
    assert sorted(m.rows_in for u in inbox.pending() for m in u.values()) == [1, 2, 3]


def test_idle_channels_are_not_kept(inbox: Inbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbox_module, "_inbox", None)
    monkeypatch.setattr(inbox_module._Handler, "timeout", 0.2)  # the driver's idle limit
    reporter = Reporter(Accumulator(), inbox.address)
    # The worker's side: a channel older than _IDLE is closed, not used again.
    monkeypatch.setattr(inbox_module, "_IDLE", -1.0)
    reporter.run().progress({("m", None, None): counted(1)})
    first = inbox_module._channels[inbox.address][0]
    reporter.run().progress({("m", None, None): counted(2)})
    assert first.fileno() == -1 and inbox_module._channels[inbox.address][0] is not first
    # The driver's side: the thread of a channel idle past its timeout ends, and the
    # worker's next message goes on a new channel.
    monkeypatch.setattr(inbox_module, "_IDLE", 30.0)
    reporter.run().progress({("m", None, None): counted(3)})
    deadline = time.monotonic() + 30
    while inbox._server._open and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not inbox._server._open
    reporter.run().progress({("m", None, None): counted(4)})
    assert sorted(m.rows_in for u in inbox.pending() for m in u.values()) == [1, 2, 3, 4]
