"""Offset arithmetic of the ``redis-stream`` source, on the driver.

An offset is ``{stream: last planned entry id, ...}``, plus, once a loss was skipped
(``failOnDataLoss=false``), ``"@dataLoss": {stream: {"count": n, "mark": id}}`` with the
cumulative count per stream, and in the one batch that rereads a recreated stream from
its start, ``"@reset": [stream, ...]`` (see :mod:`enrich.spark.stream_loss`). A batch
that reads a stream from ``0-0`` records its first entry in ``"@from": {stream: id}``, so
that its split into partitions is planned from the offsets alone
(:mod:`enrich.spark.stream_read`). When nothing is new, the start offset is returned
as it is: Spark then plans no batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import redis_options
from .stream_loss import (
    FROM_KEY,
    LOSS_KEY,
    NOTHING,
    RESET_KEY,
    StreamDataLoss,
    detect_loss,
    loss_counts,
    parse_id,
    record,
    stream_info,
)

if TYPE_CHECKING:
    from .streams import StreamSettings


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Offsets:
    """Offsets planned against the server (one connection, opened lazily)."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = redis_options.connect(self.settings.url)
        return self._client

    def last_id(self, stream: str) -> str:
        """The newest entry's id (``0-0`` for an empty or missing stream)."""
        newest = self.client.xrevrange(stream, "+", "-", count=1)
        return text(newest[0][0]) if newest else NOTHING

    def latest_id(self, stream: str) -> str:
        """Where ``startingPosition=latest`` begins: the last id the stream ever gave
        (deleted entries included), ``0-0`` for an empty or missing stream."""
        info = stream_info(self.client, stream)
        return text(info["last-generated-id"]) if info and info.get("length") else NOTHING

    def initial(self) -> dict[str, str]:
        if self.settings.start == "latest":
            return {s: self.latest_id(s) for s in self.settings.streams}
        start = NOTHING if self.settings.start == "earliest" else self.settings.start
        return dict.fromkeys(self.settings.streams, start)

    def advance(self, stream: str, start: str, upper: str | None, budget: int | None) -> str:
        """The id ``budget`` entries after ``start`` (all of them without a budget),
        never beyond ``upper``; ``start`` itself when nothing is there."""
        high = "+" if upper is None else upper
        if budget is None:
            newest = self.client.xrevrange(stream, high, "-", count=1)
            end = text(newest[0][0]) if newest else start
        else:
            page = self.client.xrange(stream, f"({start}", high, count=budget)
            end = text(page[-1][0]) if page else start
        return end if parse_id(end) > parse_id(start) else start

    def latest(
        self, start: Mapping[str, Any], target: Mapping[str, str] | None, budget: int | None
    ) -> dict[str, Any]:
        """The next batch's end offset from ``start``; a loss found on the way fails
        (``failOnDataLoss``) or is counted in the offset."""
        counts = loss_counts(start)
        before = repr(counts)
        end: dict[str, Any] = {}
        resets: list[str] = []
        starts: dict[str, str] = {}
        for stream in self.settings.streams:
            # A stream added to the option since the checkpoint starts at the beginning.
            begin = str(start.get(stream, NOTHING))
            reported = counts.get(stream, {}).get("mark")
            info = stream_info(self.client, stream) if parse_id(begin) > (0, 0) else {}
            loss = detect_loss(
                stream,
                begin,
                info,
                initial=self.settings.is_initial(begin),
                reported=reported,
            )
            if loss is not None:
                if self.settings.fail_on_data_loss:
                    raise StreamDataLoss(loss)
                record(counts, loss)
                if loss.recreated:
                    begin = NOTHING
                    resets.append(stream)
            upper = None if target is None else target.get(stream)
            end[stream] = self.advance(stream, begin, upper, budget)
            if begin == NOTHING and end[stream] != NOTHING:
                first = self.client.xrange(stream, "-", end[stream], count=1)
                starts[stream] = text(first[0][0]) if first else end[stream]
        moved = any(end[s] != str(start.get(s, NOTHING)) for s in self.settings.streams)
        if not moved and not resets and repr(counts) == before:
            return dict(start)
        if counts:
            end[LOSS_KEY] = counts
        if resets:
            end[RESET_KEY] = resets
        if starts:
            end[FROM_KEY] = starts
        return end

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
