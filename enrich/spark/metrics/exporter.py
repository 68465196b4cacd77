"""The job's metrics in Prometheus's terms: a collector read at every scrape.

Names follow Prometheus's conventions: a ``enrich_`` prefix, ``_total`` on counters,
``_seconds`` on durations, a histogram with buckets for request latency. The numbers
are read when Prometheus scrapes, from the same places :func:`statistics` and the
listener read (so they agree with them exactly): each stage's cumulative
:class:`~enrich.JoinMetrics`, the ``redis-stream`` source's counts, and the queries'
progress kept by a :class:`~.progress_board.ProgressBoard`.

Labels are bounded by the job's shape, never by its data: ``query`` (a streaming
query's name, else its id; empty outside streaming), ``stage`` (a join's or a map's
name), ``store`` (``redis``, ``http``... ``function`` for a map), ``reason`` (an
error's kind, as ``statistics()`` counts it), ``source`` and ``stream``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ...engine.records.call_metrics import bucket_at_most, bucket_bound
from .accumulator import join_names, queries_of, statistics
from .driver_counts import published
from .metric_rows import hits
from .progress_board import ProgressBoard
from .stage_labels import described

__all__ = ("COUNTERS", "LATENCY_BUCKETS", "EnrichCollector")

STAGE_LABELS = ("query", "stage", "store")

# Each stage's counters: metric name (without ``_total``) -> (JoinMetrics field, help).
COUNTERS = {
    "enrich_rows_in": ("rows_in", "Records that entered the stage."),
    "enrich_rows_out": ("rows_out", "Rows the stage emitted (1:N rows one by one)."),
    "enrich_hits": ("hits", "Records whose key found something."),
    "enrich_misses": ("misses", "Records whose key was not found."),
    "enrich_null_keys": ("null_keys", "Records whose key was null (asked nothing)."),
    "enrich_requests": ("requests", "Calls made to the store (lookup_many, a map's calls)."),
    "enrich_keys_requested": ("keys_requested", "Keys sent in those calls."),
    "enrich_coalesced": ("coalesced", "Records that shared their key's lookup."),
    "enrich_cache_hits": ("cache_hits", "Distinct keys the cache answered."),
    "enrich_cache_misses": ("cache_misses", "Distinct keys the cache did not answer."),
    "enrich_retries": ("retries", "Keys asked again after an error or a miss."),
    "enrich_timeouts": ("timeouts", "Records that ran out of time."),
    "enrich_throttled": ("throttled", "Requests the store throttled (adaptive limit)."),
    "enrich_rate_limit_waits": ("rate_limit_waits", "Calls that waited for a job rate limit."),
    "enrich_rate_limit_wait_seconds": (
        "rate_limit_wait_seconds",
        "Seconds calls waited for a job rate limit's permits.",
    ),
}

# Upper bounds of the latency histogram's buckets, in seconds: each is a bound of the
# log-scale buckets the stages record (within 10% below the round number it stands
# for), so every bucket's count is exact.
_TARGETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)
LATENCY_BUCKETS = tuple(
    dict.fromkeys(bucket_bound(bucket_at_most(t)) for t in (*_TARGETS, 1, 2.5, 5, 10, 30))
)
_BUCKETS = tuple((bucket_at_most(bound), f"{bound:.6g}") for bound in LATENCY_BUCKETS)


class EnrichCollector(Collector):
    """Reads the driver's metrics at every scrape (see the module's docstring).

    Args:
        board: the queries' progress (a listener the caller adds to the session).
    """

    def __init__(self, board: ProgressBoard) -> None:
        self._board = board
        self._lock = threading.Lock()
        self._queries: dict[str, str] = {}  # stage -> its query's label, fixed once known

    def collect(self) -> Iterator[Metric]:
        yield from self._stage_metrics()
        yield from self._query_metrics()
        yield from self._stream_metrics()

    def _query_of(self, stage: str) -> str:
        """The label of the first streaming query ``stage`` ran in ("" if none yet)."""
        with self._lock:
            known = self._queries.get(stage)
            if known is None:
                ids = queries_of(stage)
                if not ids:
                    return ""
                known = self._queries[stage] = self._board.label(ids[0])
            return known

    def _stage_metrics(self) -> Iterator[Metric]:
        counters = {
            name: CounterMetricFamily(name, doc, labels=STAGE_LABELS)
            for name, (_, doc) in COUNTERS.items()
        }
        errors = CounterMetricFamily(
            "enrich_errors",
            "Records that ended in an error, by reason.",
            labels=(*STAGE_LABELS, "reason"),
        )
        latency = HistogramMetricFamily(
            "enrich_request_duration_seconds",
            "Latency of the stage's calls to its store.",
            labels=STAGE_LABELS,
        )
        gauges = {
            "enrich_capacity": "Rows in flight per task at most (the stage's capacity).",
            "enrich_in_flight_peak": "The most rows in flight at once in a task (maps).",
            "enrich_concurrency_limit": "The adaptive limit: calls allowed in flight.",
            "enrich_target_latency_seconds": "The latency the adaptive limit aims at.",
        }
        levels = {
            name: GaugeMetricFamily(name, doc, labels=STAGE_LABELS) for name, doc in gauges.items()
        }
        for stage in join_names():
            try:
                metrics = statistics(stage)
            except LookupError:  # pragma: no cover - a name is registered before listed
                continue
            query = self._query_of(stage)
            if not query and not metrics.rows_in:
                continue  # not run yet: its query, once it runs, names its series
            info = described(stage)
            labels = (query, stage, info.store)
            for name, (attribute, _) in COUNTERS.items():
                value = hits(metrics) if attribute == "hits" else getattr(metrics, attribute)
                counters[name].add_metric(labels, value)
            for reason, count in sorted(metrics.errors.items()):
                errors.add_metric((*labels, reason), count)
            histogram = metrics.latency
            buckets = [(le, histogram.cumulative(bucket)) for bucket, le in _BUCKETS]
            latency.add_metric(labels, [*buckets, ("+Inf", histogram.total)], histogram.seconds)
            if info.capacity is not None:
                levels["enrich_capacity"].add_metric(labels, info.capacity)
            levels["enrich_in_flight_peak"].add_metric(labels, metrics.peak_in_flight)
            levels["enrich_concurrency_limit"].add_metric(labels, metrics.concurrency_limit)
            if metrics.target_latency is not None:
                levels["enrich_target_latency_seconds"].add_metric(labels, metrics.target_latency)
        yield from counters.values()
        yield errors
        yield latency
        yield from levels.values()

    def _query_metrics(self) -> Iterator[Metric]:
        rows = CounterMetricFamily(
            "enrich_query_input_rows", "Rows the query's micro-batches read.", labels=("query",)
        )
        batches = CounterMetricFamily(
            "enrich_query_batches", "Micro-batches the query ran.", labels=("query",)
        )
        input_rate = GaugeMetricFamily(
            "enrich_query_input_rows_per_second",
            "Rows per second arriving, in the latest micro-batch.",
            labels=("query",),
        )
        processed_rate = GaugeMetricFamily(
            "enrich_query_processed_rows_per_second",
            "Rows per second processed, in the latest micro-batch.",
            labels=("query",),
        )
        duration = GaugeMetricFamily(
            "enrich_query_batch_duration_seconds",
            "The latest micro-batch's duration (triggerExecution).",
            labels=("query",),
        )
        lag = GaugeMetricFamily(
            "enrich_source_lag_records",
            "Records the source holds beyond the latest micro-batch (Kafka, Redis Streams).",
            labels=("query", "source"),
        )
        for query, progress in sorted(self._board.queries().items()):
            rows.add_metric((query,), progress.input_rows)
            batches.add_metric((query,), progress.batches)
            input_rate.add_metric((query,), progress.input_rows_per_second)
            processed_rate.add_metric((query,), progress.processed_rows_per_second)
            duration.add_metric((query,), progress.batch_seconds)
            for source, records in sorted(progress.lag.items()):
                lag.add_metric((query, source), records)
        yield from (rows, batches, input_rate, processed_rate, duration, lag)

    def _stream_metrics(self) -> Iterator[Metric]:
        """The counts the sources and sinks add up on the driver
        (:mod:`~enrich.spark.metrics.driver_counts`): the redis-stream source's, per
        stream."""
        for counts in published():
            families = {
                kind: CounterMetricFamily(
                    f"enrich_{counts.family}_{kind}",
                    counts.help.format(kind=kind),
                    labels=(counts.label,),
                )
                for kind in counts.kinds
            }
            for name, kinds in sorted(counts.value().items()):
                for kind in counts.kinds:
                    families[kind].add_metric((name,), kinds.get(kind, 0))
            yield from families.values()
