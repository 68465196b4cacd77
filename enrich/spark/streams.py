"""The ``redis-stream`` data source: Redis Streams as a replayable Spark source.

Offsets are entry ids, one per stream: ``{"orders": "1718000000000-3"}`` means every
entry up to and including that id has been planned. A micro-batch reads the entries in
``(start, end]`` with ``XRANGE``, so a replayed batch reads exactly the same entries
(entries are never trimmed by this source; trimming a stream below an offset a query has
not committed loses those entries). Needs Redis 6.2+ (exclusive ``XRANGE`` bounds).

Options:
    url: ``redis://[user[:password]@]host[:port][/db]`` (``rediss://`` for TLS).
    stream: the stream key; several as a comma-separated list (one partition each).
    startingPosition: ``earliest`` (default), ``latest`` (entries added after the query
        first starts), or an entry id (the entries after it, as ``XREAD`` does).
    maxEntriesPerTrigger: the most entries per micro-batch, split evenly among the
        streams (default: no limit). ``Trigger.AvailableNow`` honours it too.

Schema: see :mod:`enrich.spark.stream_fields`. ``spark.read.format("redis-stream")``
reads everything from the starting position to the last entry at planning time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from . import redis_options
from .stream_fields import DEFAULT_SCHEMA, EntryDecoder

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

FORMAT = "redis-stream"
NOTHING = "0-0"  # an offset before every entry
PAGE = 1000  # entries per XRANGE call while reading a partition


def parse_id(text: str) -> tuple[int, int]:
    """An entry id as ``(milliseconds, sequence)``; ``ValueError`` names a bad one."""
    ms, _, seq = text.partition("-")
    try:
        parsed = (int(ms), int(seq or 0))
    except ValueError:
        parsed = (-1, -1)
    if parsed[0] < 0 or parsed[1] < 0:
        raise ValueError(f"not a Redis stream entry id: {text!r} (expected '<ms>-<seq>')")
    return parsed


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class StreamSettings:
    """The source's options, read once on the driver."""

    url: str
    streams: tuple[str, ...]
    start: str  # "earliest", "latest" or a normalised entry id
    max_entries: int | None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> StreamSettings:
        url = redis_options.required(options, "url", FORMAT)
        redis_options.endpoint(url)  # validates; errors mask the password
        names = redis_options.required(options, "stream", FORMAT)
        streams = tuple(dict.fromkeys(s.strip() for s in names.split(",") if s.strip()))
        if not streams:
            raise ValueError(f"option stream names no stream: {names!r}")
        start = str(options.get("startingPosition", "earliest")).strip()
        if start.lower() in ("earliest", "latest"):
            start = start.lower()
        else:
            try:
                ms, seq = parse_id(start)
            except ValueError:
                raise ValueError(
                    f"option startingPosition must be earliest, latest or an entry id, "
                    f"got {start!r}"
                ) from None
            start = f"{ms}-{seq}"
        max_entries = redis_options.positive_int(options, "maxEntriesPerTrigger", None)
        return cls(url, streams, start, max_entries)

    def __repr__(self) -> str:
        return (
            f"StreamSettings(url={redis_options.masked(self.url)!r}, streams={self.streams!r}, "
            f"start={self.start!r}, max_entries={self.max_entries!r})"
        )


class RedisStreamPartition(InputPartition):
    """The entries of one stream in ``(after, until]``."""

    def __init__(self, stream: str, after: str, until: str) -> None:
        super().__init__((stream, after, until))
        self.stream, self.after, self.until = stream, after, until


class _Offsets:
    """Offset arithmetic against the server (driver side)."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = redis_options.connect(self.settings.url)
        return self._client

    def last_id(self, stream: str) -> str:
        newest = self.client.xrevrange(stream, "+", "-", count=1)
        return _text(newest[0][0]) if newest else NOTHING

    def initial(self) -> dict[str, str]:
        if self.settings.start == "latest":
            return {s: self.last_id(s) for s in self.settings.streams}
        start = NOTHING if self.settings.start == "earliest" else self.settings.start
        return dict.fromkeys(self.settings.streams, start)

    def advance(self, stream: str, start: str, upper: str | None, budget: int | None) -> str:
        """The id ``budget`` entries after ``start`` (all of them without a budget),
        never beyond ``upper``; ``start`` itself when nothing is there."""
        high = "+" if upper is None else upper
        if budget is None:
            newest = self.client.xrevrange(stream, high, "-", count=1)
            end = _text(newest[0][0]) if newest else start
        else:
            page = self.client.xrange(stream, f"({start}", high, count=budget)
            end = _text(page[-1][0]) if page else start
        return end if parse_id(end) > parse_id(start) else start

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def read_partition(url: str, schema: StructType, partition: RedisStreamPartition) -> Iterator[Any]:
    """Every entry of the partition, as rows, in id order (paged ``XRANGE``)."""
    decoder = EntryDecoder(schema)
    client: Any = redis_options.connect(url)
    try:
        after = partition.after
        while True:
            page = client.xrange(partition.stream, f"({after}", partition.until, count=PAGE)
            for entry_id, fields in page:
                yield decoder.row(entry_id, fields)
            if len(page) < PAGE:
                break
            after = _text(page[-1][0])
    finally:
        client.close()
        decoder.log_counts(partition.stream)


class RedisStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over one or more streams; see the module docstring."""

    def __init__(self, settings: StreamSettings, schema: StructType) -> None:
        self.settings = settings
        self.schema = schema
        self._offsets = _Offsets(settings)
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
        self, start: dict[str, str] | None = None, limit: Any = None
    ) -> dict[str, str]:
        start = start or self._offsets.initial()
        budget = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            budget = max(1, limit.max_rows // len(self.settings.streams))
        end: dict[str, str] = {}
        for stream in self.settings.streams:
            # A stream added to the option since the checkpoint starts at the beginning.
            begin = start.get(stream, NOTHING)
            upper = None if self._target is None else self._target[stream]
            end[stream] = self._offsets.advance(stream, begin, upper, budget)
        return end

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        return [
            RedisStreamPartition(s, start.get(s, NOTHING), end[s])
            for s in self.settings.streams
            if parse_id(end[s]) > parse_id(start.get(s, NOTHING))
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RedisStreamPartition)
        return read_partition(self.settings.url, self.schema, partition)

    def commit(self, end: dict[str, str]) -> None:
        """Nothing to do: the stream keeps its entries (trim them yourself, behind the
        offsets every query has committed)."""

    def stop(self) -> None:
        self._offsets.close()


class RedisStreamBatchReader(DataSourceReader):
    """A batch read from the starting position to the last entry at planning time."""

    def __init__(self, settings: StreamSettings, schema: StructType) -> None:
        self.settings = settings
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        offsets = _Offsets(self.settings)
        try:
            start = offsets.initial() if self.settings.start != "latest" else {}
            parts = []
            for stream in self.settings.streams:
                after = start.get(stream) or offsets.last_id(stream)
                until = offsets.last_id(stream)
                if parse_id(until) > parse_id(after):
                    parts.append(RedisStreamPartition(stream, after, until))
            return parts
        finally:
            offsets.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RedisStreamPartition)
        return read_partition(self.settings.url, self.schema, partition)


class RedisStreamDataSource(DataSource):
    """``spark.readStream.format("redis-stream")`` and ``spark.read.format(...)``."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.settings = StreamSettings.of(options)

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return DEFAULT_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        EntryDecoder(schema)  # a column type no field can hold fails here, on the driver
        return RedisStreamBatchReader(self.settings, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        EntryDecoder(schema)
        return RedisStreamReader(self.settings, schema)
