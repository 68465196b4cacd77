"""Lookup-join metrics on the Spark driver: an accumulator per join, and a listener.

Each partition of a join adds its :class:`~enrich.JoinMetrics` to the join's accumulator
once, when it ends; Spark merges them on the driver as tasks finish. The driver keeps
the accumulators in a registry by join name, so :func:`statistics` reads the cumulative
numbers and :class:`EnrichMetricsListener` logs the per-micro-batch difference.

Spark Connect has no accumulators: there joins run without metrics and
:func:`statistics` raises ``LookupError`` for their names.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from typing import Any

from pyspark.accumulators import AccumulatorParam
from pyspark.sql.streaming import StreamingQueryListener

from ._metrics import JoinMetrics, LatencyHistogram

log = logging.getLogger("enrich.spark")

Totals = dict[str, JoinMetrics]

_lock = threading.Lock()
_accumulators: dict[str, Any] = {}
_names = itertools.count(1)


class MetricsParam(AccumulatorParam):  # type: ignore[misc]
    """Adds up ``{join name: JoinMetrics}`` dictionaries.

    Copy on write: the driver's accumulator server thread merges updates while other
    threads read the value, so a value once published is never changed.
    """

    def zero(self, value: Totals) -> Totals:
        return {}

    def addInPlace(self, value1: Totals, value2: Totals) -> Totals:  # noqa: N802 (pyspark's name)
        total = dict(value1)
        for name, metrics in value2.items():
            merged = JoinMetrics()
            before = value1.get(name)
            if before is not None:
                merged.merge(before)
            merged.merge(metrics)
            total[name] = merged
        return total


def new_name() -> str:
    """A fresh default join name: ``lookup_1``, ``lookup_2``, ..."""
    with _lock:
        while True:
            name = f"lookup_{next(_names)}"
            if name not in _accumulators:
                return name


def register(spark: Any, name: str) -> Any:
    """The accumulator for join ``name`` (made on first use), or None under Spark Connect."""
    context = _spark_context(spark)
    if context is None:
        log.info("no accumulators under Spark Connect: join %r runs without metrics", name)
        return None
    with _lock:
        accumulator = _accumulators.get(name)
        if accumulator is None or getattr(accumulator, "_context", context) is not context:
            accumulator = context.accumulator({}, MetricsParam())
            accumulator._context = context  # to notice a restarted SparkContext
            _accumulators[name] = accumulator
        return accumulator


def _spark_context(spark: Any) -> Any:
    try:
        return spark.sparkContext
    except Exception:  # Spark Connect sessions have no SparkContext
        return None


def names() -> list[str]:
    """The names of the joins registered in this driver, in creation order."""
    with _lock:
        return list(_accumulators)


def statistics(name: str) -> JoinMetrics:
    """The cumulative metrics of join ``name``, summed over every task that finished.

    Raises:
        LookupError: no join of that name has been created in this driver (or it runs
            under Spark Connect, which has no accumulators).
    """
    with _lock:
        accumulator = _accumulators.get(name)
        if accumulator is None:
            known = ", ".join(_accumulators) or "none"
            raise LookupError(f"no lookup join named {name!r} (known: {known})")
    total = JoinMetrics()
    found = accumulator.value.get(name)
    if found is not None:
        total.merge(found)
    return total


def difference(now: JoinMetrics, before: JoinMetrics) -> JoinMetrics:
    """``now - before`` for two snapshots of the same cumulative metrics."""
    delta = JoinMetrics()
    for field in (
        "rows_in",
        "rows_out",
        "requests",
        "keys_requested",
        "coalesced",
        "cache_hits",
        "cache_misses",
        "misses",
        "timeouts",
        "retries",
    ):
        setattr(delta, field, getattr(now, field) - getattr(before, field))
    errors = Counter(now.errors)
    errors.subtract(before.errors)
    delta.errors = +errors
    latency = LatencyHistogram()
    counts = Counter(now.latency.counts)
    counts.subtract(before.latency.counts)
    latency.counts = +counts
    latency.total = sum(latency.counts.values())
    delta.latency = latency
    return delta


class EnrichMetricsListener(StreamingQueryListener):  # type: ignore[misc]
    """Logs one line per lookup join and micro-batch, with what the join did in it.

    Add it with ``spark.streams.addListener(EnrichMetricsListener())``. The numbers
    are those that reached the driver between two progress events: with one streaming
    query at a time, exactly the micro-batch's. ``last_batch(name)`` returns the latest
    per-batch numbers of a join, ``batches`` counts the progress events seen.

    Args:
        logger: where the lines go (default: the ``enrich.spark`` logger, at INFO).
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        super().__init__()
        self._log = logger or log
        self._seen: dict[str, JoinMetrics] = {}
        self._last: dict[str, JoinMetrics] = {}
        self._lock = threading.Lock()
        self.batches = 0

    def last_batch(self, name: str) -> JoinMetrics | None:
        """The numbers of join ``name`` in the latest micro-batch that used it."""
        with self._lock:
            return self._last.get(name)

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (pyspark's name)
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802 (pyspark's name)
        progress = event.progress
        with self._lock:
            self.batches += 1
            for name in names():
                try:
                    now = statistics(name)
                except LookupError:  # pragma: no cover - registry cleared meanwhile
                    continue
                delta = difference(now, self._seen.get(name, JoinMetrics()))
                self._seen[name] = now
                if not delta.rows_in and not delta.requests:
                    continue
                self._last[name] = delta
                self._log.info(
                    "query %s batch %s: %s: %s",
                    progress.name or progress.id,
                    progress.batchId,
                    name,
                    delta.summary(),
                )

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802 (pyspark's name)
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 (pyspark's name)
        pass
