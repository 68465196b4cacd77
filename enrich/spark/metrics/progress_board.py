"""Streaming queries' progress as a monitoring system reads it: rates, durations, lag.

:class:`ProgressBoard` is a ``StreamingQueryListener`` that keeps, per query, the
latest micro-batch's rates and duration, the rows read since it started listening,
and each source's lag: the records the source holds beyond the batch's end offset.
The lag is known where the source reports its latest offset (``reportLatestOffset``):
Kafka's offsets (``{topic: {partition: offset}}``, summed over partitions) and the
``redis-stream`` source's, whose offsets carry each stream's ``entries-added``
(Redis 7.0+; summed over streams). Elsewhere it is left out.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

# The redis-stream source's offsets carry, per stream, how many entries ever had an id at
# or below the offset (Redis 7.0+): its ``enrich.spark.streams.loss.ADDED_KEY``, read here
# from Spark's progress JSON (a test holds the two equal; the metrics import no source).
ADDED_KEY = "@added"

__all__ = ("ProgressBoard", "QueryProgress", "source_lag")


@dataclass
class QueryProgress:
    """One query's numbers, as of its latest micro-batch.

    Attributes:
        input_rows: rows read by the batches heard of (a counter).
        batches: micro-batches heard of.
        input_rows_per_second / processed_rows_per_second: the latest batch's rates.
        batch_seconds: the latest batch's duration (``triggerExecution``).
        lag: records each source (by its description) holds beyond the latest batch.
    """

    input_rows: int = 0
    batches: int = 0
    input_rows_per_second: float = 0.0
    processed_rows_per_second: float = 0.0
    batch_seconds: float = 0.0
    lag: dict[str, int] = field(default_factory=dict)


def _offset(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _field(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)


def source_lag(source: Any) -> int | None:
    """Records between a source's end offset and its latest one, from one source's
    progress (an object or its dict form); None when the source does not say."""
    end, latest = _offset(_field(source, "endOffset")), _offset(_field(source, "latestOffset"))
    if not isinstance(end, Mapping) or not isinstance(latest, Mapping):
        return None
    if ADDED_KEY in latest:  # redis-stream: entries-added at the newest entry and at the end
        newest, known = latest[ADDED_KEY], end.get(ADDED_KEY) or {}
        lag = 0
        for stream, last in latest.items():
            if stream.startswith("@"):
                continue
            if str(end.get(stream)) == str(last):
                continue  # caught up
            if stream not in newest or stream not in known:
                return None  # Redis before 7.0 counts no entries: not known
            lag += max(0, int(newest[stream]) - int(known[stream]))
        return lag
    total = 0  # Kafka: {topic: {partition: offset}}
    for topic, partitions in latest.items():
        ends = end.get(topic)
        if not isinstance(partitions, Mapping) or not isinstance(ends, Mapping):
            return None
        for partition, offset in partitions.items():
            total += max(0, int(offset) - int(ends.get(partition, offset)))
    return total


class ProgressBoard(StreamingQueryListener):
    """Keeps each streaming query's latest progress (see the module's docstring).

    Queries are known by their name, else by their id. Thread-safe: Spark's listener
    bus writes, a scrape reads :meth:`queries`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}
        self._queries: dict[str, QueryProgress] = {}

    def label(self, query_id: str) -> str:
        """A query's label: its name, else its id."""
        with self._lock:
            return self._names.get(query_id, query_id)

    def queries(self) -> dict[str, QueryProgress]:
        """A copy of every query's numbers, by label."""
        with self._lock:
            return {
                name: QueryProgress(**{**vars(p), "lag": dict(p.lag)})
                for name, p in self._queries.items()
            }

    def onQueryStarted(self, event: Any) -> None:
        with self._lock:
            self._names[str(event.id)] = event.name or str(event.id)

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        query = str(progress.id)
        with self._lock:
            label = self._names.setdefault(query, progress.name or query)
            numbers = self._queries.setdefault(label, QueryProgress())
            numbers.input_rows += int(progress.numInputRows or 0)
            numbers.batches += 1
            numbers.input_rows_per_second = float(progress.inputRowsPerSecond or 0.0)
            numbers.processed_rows_per_second = float(progress.processedRowsPerSecond or 0.0)
            duration = (progress.durationMs or {}).get("triggerExecution")
            numbers.batch_seconds = float(duration or 0) / 1000
            for source in progress.sources or ():
                lag = source_lag(source)
                if lag is not None:
                    numbers.lag[str(source.description)] = lag

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
