"""The ``redis-stream`` data source: Redis Streams as a replayable Spark source.

Offsets are entry ids, one per stream: ``{"orders": "1718000000000-3"}`` means every
entry up to and including that id has been planned. A micro-batch reads the entries in
``(start, end]`` with ``XRANGE``, so a replayed batch reads exactly the same entries.
The source never trims a stream; entries after a committed offset that were trimmed or
deleted fail the query (``failOnDataLoss``, see :mod:`enrich.spark.streams.loss`). Needs
Redis 6.2+ (exclusive ``XRANGE`` bounds); 7.0+ detects every loss exactly.

Options:
    url: ``redis://[user[:password]@]host[:port][/db]`` (``rediss://`` for TLS).
    stream: the stream key; several as a comma-separated list (one partition each).
    startingPosition: ``earliest`` (default), ``latest`` (entries added after the query
        first starts), or an entry id (the entries after it, as ``XREAD`` does).
    maxEntriesPerTrigger: the most entries per micro-batch, split evenly among the
        streams (default: no limit, as Kafka's ``maxOffsetsPerTrigger``; ``0``: no
        limit). ``Trigger.AvailableNow`` honours it too. Needs pyspark 4.2+ (read limits
        of Python sources); older versions read everything available in each
        micro-batch.
    partitionsPerStream: the partitions each stream's batch is split into (default: the
        session's parallelism divided among the streams).
    failOnDataLoss: ``true`` (default) or ``false``: skip lost entries, log and count them.
    mode: ``PERMISSIVE`` (default), ``DROPMALFORMED`` or ``FAILFAST``, for entries with a
        field that does not parse (:mod:`enrich.spark.streams.fields`).
    columnNameOfCorruptRecord: the column that gets a malformed entry as JSON text, when
        the schema names it (default ``_corrupt_record``).

Schema: see :mod:`enrich.spark.streams.fields`. ``spark.read.format("redis-stream")``
reads everything from the starting position to the last entry at planning time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from .fields import DEFAULT_SCHEMA
from .loss import (
    ADDED_KEY,
    CUTS_KEY,
    FROM_KEY,
    NOTHING,
    RESET_KEY,
    loss_counts,
    parse_id,
)
from .offsets import Offsets, text
from .read import RedisStreamPartition, read_partition, stream_partitions
from .stream_counts import counter_for
from .stream_options import FORMAT, StreamSettings

try:  # pyspark >= 4.2: read limits and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older pyspark: every read is unlimited
    ReadLimit = object  # type: ignore[assignment,misc]
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

__all__ = ("FORMAT", "NOTHING", "RedisStreamDataSource", "StreamSettings", "parse_id")


class RedisStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over one or more streams; see the module docstring."""

    def __init__(self, settings: StreamSettings, schema: StructType, counter: Any = None) -> None:
        self.settings = settings
        self.schema = schema
        self.counter = counter
        self._offsets = Offsets(settings)
        self._target: dict[str, str] | None = None

    def initialOffset(self) -> dict[str, str]:
        return self._offsets.initial()

    def getDefaultReadLimit(self) -> Any:
        if self.settings.max_entries is None or ReadMaxRows is None:
            return ReadAllAvailable() if ReadAllAvailable is not None else None
        return ReadMaxRows(self.settings.max_entries)

    def prepareForTriggerAvailableNow(self) -> None:
        # Entries added after this moment are left for a later query run.
        self._target = {s: self._offsets.last_id(s) for s in self.settings.streams}

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        start = start or self._offsets.initial()
        budget = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            budget = max(1, limit.max_rows // len(self.settings.streams))
        return self._offsets.latest(start, self._target, budget)

    def reportLatestOffset(self) -> dict[str, Any]:
        """The streams' newest entries (``latestOffset`` in the query's progress):
        with the batch's end offset, how far the query is behind."""
        return self._offsets.newest()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        reported = loss_counts(end)
        resets = end.get(RESET_KEY) or []
        firsts = end.get(FROM_KEY) or {}
        known = start.get(ADDED_KEY) or {}
        cuts = end.get(CUTS_KEY) or {}
        parts: list[InputPartition] = []
        for s in self.settings.streams:
            after = NOTHING if s in resets else str(start.get(s, NOTHING))
            parts += stream_partitions(
                s,
                after,
                end[s],
                self.settings.partitions,
                firsts.get(s) if after == NOTHING else None,
                cuts=cuts.get(s),
                committed=after,
                reported=reported.get(s, {}).get("mark"),
                initial=self.settings.is_initial(after),
                added=known.get(s),
            )
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RedisStreamPartition)
        return read_partition(self.settings, self.schema, partition, self.counter)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the stream keeps its entries (trim them yourself, behind the
        offsets every query has committed)."""

    def stop(self) -> None:
        self._offsets.close()


class RedisStreamBatchReader(DataSourceReader):
    """A batch read from the starting position to the last entry at planning time (what
    is present in between; ``failOnDataLoss`` concerns streaming queries)."""

    def __init__(self, settings: StreamSettings, schema: StructType, counter: Any = None) -> None:
        self.settings = settings
        self.schema = schema
        self.counter = counter

    def partitions(self) -> Sequence[InputPartition]:
        offsets = Offsets(self.settings)
        try:
            start = offsets.initial() if self.settings.start != "latest" else {}
            parts: list[InputPartition] = []
            for stream in self.settings.streams:
                after = start.get(stream) or offsets.last_id(stream)
                until = offsets.last_id(stream)
                first = offsets.client.xrange(stream, f"({after}", "+", count=1)
                parts += stream_partitions(
                    stream,
                    after,
                    until,
                    self.settings.partitions,
                    text(first[0][0]) if first and after == NOTHING else None,
                )
            return parts
        finally:
            offsets.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RedisStreamPartition)
        return read_partition(self.settings, self.schema, partition, self.counter)


class RedisStreamDataSource(DataSource):
    """``spark.readStream.format("redis-stream")`` and ``spark.read.format(...)``."""

    # In the class :func:`counted_source` makes: a Spark accumulator, and the session's
    # default parallelism (the default of ``partitionsPerStream``).
    counter: Any = None
    parallelism: int | None = None

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.settings = StreamSettings.of(options, type(self).parallelism)

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return DEFAULT_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        self.settings.decoder(schema)  # a column no field can hold fails here, on the driver
        return RedisStreamBatchReader(self.settings, schema, type(self).counter)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self.settings.decoder(schema)
        return RedisStreamReader(self.settings, schema, type(self).counter)


def counted_source(spark: Any) -> type[RedisStreamDataSource]:
    """The source class to register with ``spark``: its tasks add what they count to an
    accumulator of this driver process (:func:`enrich.spark.stream_statistics`), and
    ``partitionsPerStream`` defaults to the session's default parallelism.

    The class is made here, not imported, so that Spark pickles it with its accumulator.
    """
    counter = counter_for(spark)
    try:
        parallelism: int | None = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: the conf, if set
        parallelism = int(spark.conf.get("spark.default.parallelism", "0")) or None
    return type(
        "RedisStreamDataSource",
        (RedisStreamDataSource,),
        {
            "counter": counter,
            "parallelism": parallelism,
            "__qualname__": "counted_source.<locals>.RedisStreamDataSource",
        },
    )
