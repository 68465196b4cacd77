"""A job's closing summary waits for the listener's line of the last micro-batch.

Spark's listener bus delivers a progress event a moment after the query reports it;
the job's summary used to come first. No JVM here: the events are handed over by hand,
from another thread as the bus does.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

from enrich.spark import EnrichMetricsListener


def progress(query: str, batch: int) -> SimpleNamespace:
    return SimpleNamespace(progress=SimpleNamespace(id=query, batchId=batch, name=None))


def test_wait_for_returns_once_the_batch_was_heard() -> None:
    listener = EnrichMetricsListener()
    listener.onQueryProgress(progress("q", 0))
    assert listener.wait_for("q", 0, timeout=0)
    assert not listener.wait_for("q", 1, timeout=0)  # not yet heard of
    assert not listener.wait_for("other", 0, timeout=0)
    bus = threading.Thread(target=listener.onQueryProgress, args=(progress("q", 1),))
    bus.start()
    assert listener.wait_for("q", 1, timeout=30)
    bus.join()
    assert listener.batches == 2
