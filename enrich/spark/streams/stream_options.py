"""The ``redis-stream`` source's options, read once on the driver (see
:mod:`enrich.spark.streams.stream_source` for what each means)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.types import StructType

from .. import redis_options
from .fields import CORRUPT_COLUMN, EntryDecoder, Mode
from .loss import RESERVED, fail_on_data_loss, parse_id

FORMAT = "redis-stream"


@dataclass(frozen=True)
class StreamSettings:
    """The source's options, read once on the driver."""

    url: str
    streams: tuple[str, ...]
    start: str  # "earliest", "latest" or a normalised entry id
    max_entries: int | None
    fail_on_data_loss: bool = True
    mode: Mode = Mode.PERMISSIVE
    corrupt_column: str = CORRUPT_COLUMN
    partitions: int = 1  # per stream and micro-batch

    @classmethod
    def of(cls, options: Mapping[str, str], parallelism: int | None = None) -> StreamSettings:
        """The settings of ``options``; ``parallelism`` (the session's default parallelism,
        else this machine's CPUs) gives ``partitionsPerStream`` its default."""
        url = redis_options.required(options, "url", FORMAT)
        redis_options.endpoint(url)  # validates; errors mask the password
        names = redis_options.required(options, "stream", FORMAT)
        streams = tuple(dict.fromkeys(s.strip() for s in names.split(",") if s.strip()))
        if not streams:
            raise ValueError(f"option stream names no stream: {names!r}")
        for reserved in RESERVED:
            if reserved in streams:
                raise ValueError(f"option stream: {reserved!r} is reserved for the offsets")
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
        # No limit by default (as Kafka's maxOffsetsPerTrigger): the sink publishes a batch
        # of any size in bounded steps, and fewer, larger micro-batches pay Spark's fixed
        # cost per batch less often.
        max_entries = redis_options.row_limit(options, "maxEntriesPerTrigger", 0)
        corrupt = str(options.get("columnNameOfCorruptRecord", CORRUPT_COLUMN)).strip()
        if not corrupt:
            raise ValueError("option columnNameOfCorruptRecord must name a column")
        slots = parallelism or os.cpu_count() or 1
        default_parts = max(1, -(-slots // len(streams)))
        parts = redis_options.positive_int(options, "partitionsPerStream", default_parts)
        assert parts is not None
        return cls(
            url,
            streams,
            start,
            max_entries,
            fail_on_data_loss(options),
            Mode.of(options),
            corrupt,
            parts,
        )

    def is_initial(self, offset: str) -> bool:
        """``offset`` is the explicit starting position, nothing read past it yet."""
        return self.start not in ("earliest", "latest") and offset == self.start

    def decoder(self, schema: StructType, stream: str = "") -> EntryDecoder:
        return EntryDecoder(
            schema, mode=self.mode, corrupt_column=self.corrupt_column, stream=stream
        )

    def __repr__(self) -> str:
        return (
            f"StreamSettings(url={redis_options.masked(self.url)!r}, streams={self.streams!r}, "
            f"start={self.start!r}, max_entries={self.max_entries!r}, "
            f"fail_on_data_loss={self.fail_on_data_loss!r}, mode={self.mode.value!r}, "
            f"corrupt_column={self.corrupt_column!r}, partitions={self.partitions!r})"
        )
