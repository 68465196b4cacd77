"""Lookup-join metrics on the Spark driver: an accumulator per join, and a listener.

Each partition of a join adds its :class:`~enrich.JoinMetrics` to the join's accumulator
once, when it ends; Spark merges them on the driver as tasks finish. The driver keeps
the accumulators in a registry by join name, so :func:`statistics` reads the cumulative
numbers; tasks of streaming queries file theirs under the query and micro-batch ids too,
which :class:`EnrichMetricsListener` logs batch by batch.

Spark Connect has no accumulators: there :func:`statistics` raises ``LookupError``, and a
streaming join's numbers come from each micro-batch's progress instead
(:mod:`enrich.spark.metrics.observed`), which the listener reads when no accumulator has them.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

from pyspark.accumulators import AccumulatorParam
from pyspark.sql.streaming.listener import StreamingQueryListener

from ...engine.records.call_metrics import JoinMetrics
from .inbox import Reporter, inbox_for, pending, retire
from .observed import observed_statistics

log = logging.getLogger("enrich.spark")

# A task's update: (join name, streaming query id, micro-batch id) -> its metrics; the
# ids are None outside streaming queries.
BatchKey = tuple[str, "str | None", "int | None"]
Update = dict[BatchKey, JoinMetrics]

# Per-batch entries kept on the driver for the listener (older ones are dropped; the
# totals keep counting).
KEPT_BATCHES = 256

_lock = threading.Lock()
_accumulators: dict[str, Any] = {}
_names = itertools.count(1)


class Totals:
    """An accumulator's value: cumulative metrics by join, and recent ones by batch.

    Never changed once published: the driver's accumulator server thread merges updates
    while other threads read the value. ``runs``: the task runs whose final updates it
    holds (an update's key ``("", run id, None)``), so that the driver retires their
    snapshots from its inbox (:mod:`.inbox`) when they arrive.
    """

    __slots__ = ("batches", "joins", "runs")

    def __init__(
        self,
        joins: dict[str, JoinMetrics] | None = None,
        batches: dict[BatchKey, JoinMetrics] | None = None,
        runs: frozenset[str] = frozenset(),
    ) -> None:
        self.joins: dict[str, JoinMetrics] = joins or {}
        self.batches: dict[BatchKey, JoinMetrics] = batches or {}
        self.runs = runs

    @classmethod
    def of(cls, update: Totals | Update) -> Totals:
        if isinstance(update, Totals):
            return update
        joins: dict[str, JoinMetrics] = {}
        batches: dict[BatchKey, JoinMetrics] = {}
        runs: set[str] = set()
        for key, metrics in update.items():
            if not key[0]:  # ("", run id, None): the run this final update ends
                runs.add(str(key[1]))
                continue
            _add(joins, key[0], metrics)
            if key[1] is not None:
                _add(batches, key, metrics)
        return cls(joins, batches, frozenset(runs))

    def plus(self, other: Totals) -> Totals:
        joins = dict(self.joins)
        for name, metrics in other.joins.items():
            _add(joins, name, metrics)
        batches = dict(self.batches)
        for key, metrics in other.batches.items():
            _add(batches, key, metrics)
        while len(batches) > KEPT_BATCHES:
            del batches[next(iter(batches))]
        return Totals(joins, batches, self.runs | other.runs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Totals, (self.joins, self.batches, self.runs))


def _add(into: dict[Any, JoinMetrics], key: Any, metrics: JoinMetrics) -> None:
    merged = JoinMetrics()
    before = into.get(key)
    if before is not None:
        merged.merge(before)
    merged.merge(metrics)
    into[key] = merged  # a new object: published values never change


class MetricsParam(AccumulatorParam[Totals]):
    """Adds up tasks' updates (``{(name, query id, batch id): JoinMetrics}``)."""

    def zero(self, value: Totals) -> Totals:
        return Totals()

    def addInPlace(self, value1: Totals | Update, value2: Totals | Update) -> Totals:
        total = Totals.of(value1).plus(Totals.of(value2))
        if total.runs and retire(total.runs):  # on the driver: the runs' updates are in
            return Totals(total.joins, total.batches)
        return total


def new_name(prefix: str = "lookup") -> str:
    """A fresh default name: ``lookup_1``, ``lookup_2``, ... (``map_3`` for a map)."""
    with _lock:
        while True:
            name = f"{prefix}_{next(_names)}"
            if name not in _accumulators:
                return name


def register(spark: Any, name: str) -> Any:
    """What tasks of join ``name`` report through: its accumulator (made on first use)
    with the driver's metrics inbox (:mod:`.inbox`), or None under Spark Connect."""
    context = _spark_context(spark)
    if context is None:
        log.info("no accumulators under Spark Connect: join %r runs without metrics", name)
        return None
    with _lock:
        accumulator = _accumulators.get(name)
        if accumulator is None or getattr(accumulator, "_context", context) is not context:
            accumulator = context.accumulator(Totals(), MetricsParam())
            accumulator._context = context  # to notice a restarted SparkContext
            _accumulators[name] = accumulator
    inbox = inbox_for(context)
    return Reporter(accumulator, None if inbox is None else inbox.address)


def _spark_context(spark: Any) -> Any:
    try:
        return spark.sparkContext
    except Exception:  # Spark Connect sessions have no SparkContext
        return None


def join_names() -> list[str]:
    """The names of the lookup joins (and SQL lookups) created in this driver, in
    creation order."""
    with _lock:
        return list(_accumulators)


def statistics(name: str) -> JoinMetrics:
    """The cumulative metrics of the join named ``name``, summed over every task that
    finished, and the last snapshot of every task whose output Spark stopped reading
    (``show()``, ``limit()``: :mod:`.inbox`).

    Raises:
        LookupError: no join of that name was created in this driver process (or it
            ran under Spark Connect, which has no accumulators).
    """
    with _lock:
        accumulator = _accumulators.get(name)
        if accumulator is None:
            known = ", ".join(_accumulators) or "none"
            raise LookupError(f"no lookup join named {name!r} (known: {known})")
    total = JoinMetrics()
    found = accumulator.value.joins.get(name)
    if found is not None:
        total.merge(found)
    for _, snapshot in pending(name):
        total.merge(snapshot)
    return total


def batch_statistics(name: str, query_id: str, batch_id: int) -> JoinMetrics | None:
    """What join ``name`` did in one micro-batch of a streaming query (None if it did
    nothing there, or the batch is older than the last few hundred kept)."""
    with _lock:
        accumulator = _accumulators.get(name)
    if accumulator is None:
        return None
    found = accumulator.value.batches.get((name, query_id, batch_id))
    if found is None:
        return None
    copy = JoinMetrics()
    copy.merge(found)
    return copy


class EnrichMetricsListener(StreamingQueryListener):
    """Logs one line per lookup join and micro-batch, with what the join did in it.

    Add it with ``spark.streams.addListener(EnrichMetricsListener())``. The numbers are
    exact per micro-batch and per query (tasks file their metrics under the query and
    batch ids they ran for), whatever the delay of Spark's listener bus. Under Spark
    Connect (no accumulators) they come from the progress's observed metrics, which
    have no latencies.
    ``last_batch(name)`` returns a join's numbers in the latest micro-batch that used
    it; ``batches`` counts the progress events seen.

    Args:
        logger: where the lines go (default: the ``enrich.spark`` logger, at INFO).
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        super().__init__()
        self._log = logger or log
        self._last: dict[str, JoinMetrics] = {}
        self._lock = threading.Lock()
        self._heard = threading.Condition(self._lock)
        self._latest: dict[str, int] = {}  # query id -> the latest batch id heard of
        self.batches = 0

    def wait_for(self, query_id: str, batch_id: int, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds) until the progress of micro-batch
        ``batch_id`` of query ``query_id`` has been logged; whether it was.

        Spark's listener bus delivers progress a moment after the query reports it:
        a job waits here before its closing summary, so that the summary comes last.
        """
        with self._heard:
            return self._heard.wait_for(lambda: self._latest.get(query_id, -1) >= batch_id, timeout)

    def last_batch(self, name: str) -> JoinMetrics | None:
        """The numbers of join ``name`` in the latest micro-batch that used it."""
        with self._lock:
            return self._last.get(name)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        query, batch = str(progress.id), int(progress.batchId)
        observed = observed_statistics(progress)
        for name in dict.fromkeys([*join_names(), *observed]):
            metrics = batch_statistics(name, query, batch) or observed.get(name)
            if metrics is None:
                continue
            with self._lock:
                self._last[name] = metrics
            self._log.info(
                "query %s batch %s: %s: %s",
                progress.name or query,
                batch,
                name,
                metrics.summary(),
            )
        with self._heard:
            self.batches += 1
            self._latest[query] = max(batch, self._latest.get(query, -1))
            self._heard.notify_all()

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def queries_of(name: str) -> list[str]:
    """The streaming query ids that join ``name`` ran in, among the micro-batches kept
    on the driver and the pending snapshots (oldest first; empty outside streaming)."""
    with _lock:
        accumulator = _accumulators.get(name)
    keys = [] if accumulator is None else list(accumulator.value.batches)
    keys += [key for key, _ in pending(name)]
    return list(dict.fromkeys(str(q) for n, q, _ in keys if n == name and q is not None))
