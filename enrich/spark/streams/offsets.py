"""Offset arithmetic of the ``redis-stream`` source, on the driver.

An offset is ``{stream: last planned entry id, ...}``, plus, where they apply:

* ``"@dataLoss": {stream: {"count": n, "entries": m, "mark": id}}``: losses skipped
  (``failOnDataLoss=false``), cumulative per stream;
* ``"@reset": [stream, ...]``: in the one batch that rereads a recreated stream;
* ``"@added": {stream: n}``: Redis 7.0+, how many entries were ever added up to the
  offset, when known (see :mod:`enrich.spark.streams.loss`);
* ``"@from": {stream: id}``: the first entry of a stream read from ``0-0``, so that the
  split into partitions is planned from the offsets alone (:mod:`enrich.spark.streams.read`);
* ``"@cuts": {stream: [id, ...]}``: in a batch bounded by ``maxEntriesPerTrigger``, the
  entries where its partitions end, chosen from the entries themselves (the driver has
  just read their ids to find the end), so each partition gets its share of the entries.

When nothing is new, the start offset is returned as it is: Spark then plans no batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import redis_options
from .loss import (
    ADDED_KEY,
    CUTS_KEY,
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
    from .stream_options import StreamSettings


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

    def initial(self) -> dict[str, Any]:
        """``latest`` begins at the last id each stream ever gave (deleted entries
        included; ``0-0`` for an empty or missing stream), with its place in
        ``entries-added`` on Redis 7.0+."""
        if self.settings.start != "latest":
            start = NOTHING if self.settings.start == "earliest" else self.settings.start
            return dict.fromkeys(self.settings.streams, start)
        offset: dict[str, Any] = {}
        added: dict[str, int] = {}
        for stream in self.settings.streams:
            info = stream_info(self.client, stream)
            offset[stream] = text(info["last-generated-id"]) if info and info["length"] else NOTHING
            if info and info["length"] and "entries-added" in info:
                added[stream] = int(info["entries-added"])
        if added:
            offset[ADDED_KEY] = added
        return offset

    def advance(
        self, stream: str, start: str, upper: str | None, budget: int | None
    ) -> tuple[str, int | None, list[str]]:
        """The id ``budget`` entries after ``start`` (all of them without a budget),
        never beyond ``upper``, ``start`` itself when nothing is there; how many entries
        that is, when counted; and, when counted, the ids that cut them into the
        source's partitions (equal shares)."""
        high = "+" if upper is None else upper
        if budget is None:
            newest = self.client.xrevrange(stream, high, "-", count=1)
            end, count, cuts = (text(newest[0][0]) if newest else start), None, []
        else:
            page = self.client.xrange(stream, f"({start}", high, count=budget)
            end, count = (text(page[-1][0]) if page else start), len(page)
            cuts = equal_cuts([entry[0] for entry in page], self.settings.partitions)
        if parse_id(end) > parse_id(start):
            return end, count, cuts
        return start, 0, []

    def latest(
        self, start: Mapping[str, Any], target: Mapping[str, str] | None, budget: int | None
    ) -> dict[str, Any]:
        """The next batch's end offset from ``start``; a loss found on the way fails
        (``failOnDataLoss``) or is counted in the offset."""
        counts = loss_counts(start)
        before = repr(counts)
        known: Mapping[str, int] = start.get(ADDED_KEY) or {}
        end: dict[str, Any] = {}
        resets: list[str] = []
        starts: dict[str, str] = {}
        added: dict[str, int] = {}
        cuts: dict[str, list[str]] = {}
        for stream in self.settings.streams:
            # A stream added to the option since the checkpoint starts at the beginning.
            begin = str(start.get(stream, NOTHING))
            info = stream_info(self.client, stream)
            place = 0 if begin == NOTHING else known.get(stream)
            loss = detect_loss(
                stream,
                begin,
                info,
                initial=self.settings.is_initial(begin),
                reported=counts.get(stream, {}).get("mark"),
                added=place,
            )
            if loss is not None:
                if self.settings.fail_on_data_loss:
                    raise StreamDataLoss(loss)
                record(counts, loss)
                if loss.recreated:
                    begin, place = NOTHING, 0
                    resets.append(stream)
            upper = None if target is None else target.get(stream)
            end[stream], count, cut = self.advance(stream, begin, upper, budget)
            if cut:
                cuts[stream] = cut
            if begin == NOTHING and end[stream] != NOTHING:
                first = self.client.xrange(stream, "-", end[stream], count=1)
                starts[stream] = text(first[0][0]) if first else end[stream]
            lost = 0 if loss is None or loss.recreated else loss.entries
            where = _place(info, end[stream], begin, place, count, lost)
            if where is not None:
                added[stream] = where
        moved = any(end[s] != str(start.get(s, NOTHING)) for s in self.settings.streams)
        if not moved and not resets and repr(counts) == before:
            return dict(start)
        for key, value in ((LOSS_KEY, counts), (RESET_KEY, resets), (FROM_KEY, starts),
                           (ADDED_KEY, added), (CUTS_KEY, cuts)):  # fmt: skip
            if value:
                end[key] = value
        return end

    def newest(self) -> dict[str, Any]:
        """Each stream's newest id, with ``entries-added`` (Redis 7.0+; none on 6.2)
        under ``@added``: what the source reports as its latest offset, for its lag."""
        offset: dict[str, Any] = {}
        added: dict[str, int] = {}
        for stream in self.settings.streams:
            info = stream_info(self.client, stream)
            offset[stream] = text(info["last-generated-id"]) if info else NOTHING
            if info and "entries-added" in info:
                added[stream] = int(info["entries-added"])
        offset[ADDED_KEY] = added  # even empty: tells a redis-stream offset from others
        return offset

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def equal_cuts(ids: list[bytes | str], parts: int) -> list[str]:
    """The ids ending each of the first ``parts - 1`` equal shares of ``ids`` (in id
    order); none when there are fewer ids than parts."""
    if parts < 2 or len(ids) < parts:
        return []
    return [text(ids[len(ids) * i // parts - 1]) for i in range(1, parts)]


def _place(
    info: Mapping[str, Any] | None,
    end: str,
    begin: str,
    place: int | None,
    count: int | None,
    lost: int | None,
) -> int | None:
    """How many entries were ever added with an id up to ``end`` (Redis 7.0+), when
    known: ``entries-added`` if ``end`` is the last id the stream gave, else the count
    at ``begin`` plus the entries planned and the ones lost in between."""
    if not info or "entries-added" not in info:
        return None
    if end == text(info["last-generated-id"]):
        return int(info["entries-added"])
    if end == begin:
        return place
    if place is None or count is None or lost is None:
        return None
    return place + lost + count
