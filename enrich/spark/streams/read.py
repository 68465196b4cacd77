"""Reading a ``redis-stream`` batch: its ranges, split by entry id, and the executor side.

A stream's ``(after, until]`` range of a micro-batch is split into partitions from the
offsets alone, so a replayed batch reads exactly the same entries in each partition,
whatever was added or trimmed since. A batch bounded by ``maxEntriesPerTrigger`` (the
default) carries its cut ids in its end offset (``@cuts``, chosen by the driver from the
entries it counted: equal shares). An unbounded batch is cut by pure arithmetic on the
two ids (:func:`split_range`): the milliseconds between them in equal spans; entries are
rarely spread evenly in time, so a partition may get more entries than another, or none.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from .. import redis_options
from .loss import StreamDataLoss, detect_loss, parse_id, stream_info
from .offsets import text
from .page_batches import PageBatches, arrow_conversion

if TYPE_CHECKING:
    from .stream_options import StreamSettings

PAGE = 1000  # entries per XRANGE call while reading a partition
LAST_SEQ = 2**64 - 1  # the largest sequence number of an entry id

log = logging.getLogger("enrich.spark.streams.source")


def split_range(
    after: str, until: str, parts: int, first: str | None = None
) -> list[tuple[str, str]]:
    """``(after, until]`` as up to ``parts`` consecutive ranges ``(a, b]`` that cover it
    exactly, cut at whole milliseconds (``<ms>-18446744073709551615``, the last possible
    id of a millisecond) evenly between ``after`` (or ``first``, the first entry of a
    range that begins at ``0-0``) and ``until``. Fewer ranges when the ids are less than
    ``parts`` ms apart."""
    low, high = parse_id(first or after)[0], parse_id(until)[0]
    cuts = sorted({low + (high - low) * i // parts for i in range(1, parts)} - {high})
    bounds = [after, *(f"{ms}-{LAST_SEQ}" for ms in cuts if ms >= low), until]
    return [(a, b) for a, b in itertools.pairwise(bounds) if parse_id(b) > parse_id(a)]


class RedisStreamPartition(InputPartition):
    """The entries of one stream in ``(after, until]``.

    ``committed`` (the batch's start for this stream) asks the task to look for entries
    lost after it before it reads; ``reported`` is the loss already counted there.
    """

    def __init__(
        self,
        stream: str,
        after: str,
        until: str,
        *,
        committed: str | None = None,
        reported: str | None = None,
        initial: bool = False,
        added: int | None = None,
    ) -> None:
        super().__init__((stream, after, until))
        self.stream, self.after, self.until = stream, after, until
        self.committed, self.reported, self.initial = committed, reported, initial
        self.added = added  # entries ever added up to ``committed`` (Redis 7.0+), if known


def stream_partitions(
    stream: str,
    after: str,
    until: str,
    parts: int,
    first: str | None = None,
    cuts: list[str] | None = None,
    **check: Any,
) -> list[RedisStreamPartition]:
    """The partitions of one stream's ``(after, until]`` (none when it is empty): cut at
    ``cuts`` when the offset carries them, else by :func:`split_range`."""
    if cuts:
        bounds = [after, *cuts, until]
        ranges = [(a, b) for a, b in itertools.pairwise(bounds) if parse_id(b) > parse_id(a)]
    else:
        ranges = split_range(after, until, parts, first)
    return [RedisStreamPartition(stream, a, b, **check) for a, b in ranges]


def read_partition(
    settings: StreamSettings, schema: StructType, partition: RedisStreamPartition, counter: Any
) -> Iterator[Any]:
    """Every entry of the partition in id order (paged ``XRANGE``): a record batch a page
    (:mod:`~enrich.spark.streams.page_batches`), or rows where pyspark cannot take batches."""
    decoder = settings.decoder(schema, partition.stream)
    conversion = arrow_conversion(schema)
    batches = PageBatches(decoder, schema, conversion) if conversion is not None else None
    client: Any = redis_options.connect(settings.url)
    lost = 0
    try:
        if partition.committed is not None:
            lost = _check_before_reading(settings, client, partition)
        if batches is not None:  # XRANGE's reply as hiredis parsed it: no dict per entry
            client.set_response_callback("XRANGE", _raw)
        after = partition.after
        while True:
            page = client.xrange(partition.stream, f"({after}", partition.until, count=PAGE)
            if batches is not None:
                if page:
                    yield batches.batch(page)
            else:
                for entry_id, fields in page:
                    row = decoder.row(entry_id, fields)
                    if row is not None:
                        yield row
            if len(page) < PAGE:
                break
            after = text(page[-1][0])
    finally:
        client.close()
        decoder.log_counts()
        counts = decoder.statistics()
        if lost:
            counts["lost"] = lost
        if counter is not None and counts:
            counter.add({partition.stream: counts})


def _raw(response: Any, **_: Any) -> Any:
    return response


def _check_before_reading(settings: StreamSettings, client: Any, part: RedisStreamPartition) -> int:
    """Entries of the batch trimmed since it was planned (or before its replay): fail, or
    log and return 1 (``failOnDataLoss=false``)."""
    assert part.committed is not None
    loss = detect_loss(
        part.stream,
        part.committed,
        stream_info(client, part.stream),
        initial=part.initial,
        reported=part.reported,
        added=part.added,
    )
    if loss is None:
        return 0
    if settings.fail_on_data_loss:
        raise StreamDataLoss(loss)
    log.warning("%s (skipped while reading: failOnDataLoss=false)", loss.message())
    return 1
