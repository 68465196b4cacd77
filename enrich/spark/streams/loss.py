"""Data loss in a Redis stream: the rule that finds it, and what the offsets record of it.

A query has read every entry up to its committed offset ``after``. Entries with larger ids
that existed once and no longer do (trimmed by ``MAXLEN``/``MINID``, exact or ``~``,
removed by ``XDEL``, or gone with the whole stream) are lost to it. :func:`detect_loss`
decides that from one ``XINFO STREAM`` reply, without reading the entries:

* the key is gone: lost (a stream the query has read from was deleted);
* its ``last-generated-id`` is below ``after``, or (7.0+) its ``entries-added`` is below
  the count the offset recorded: deleted and recreated: lost, and with
  ``failOnDataLoss=false`` the new stream is read from its start;
* Redis 7.0+: ``max-deleted-entry-id`` (set by ``XDEL``, not by trims) is after
  ``after``: an entry after the offset was deleted: lost;
* ``last-generated-id`` is after ``after`` but the newest entry present is older: the
  stream's last entries were deleted or trimmed away: lost;
* the first entry present is after ``after``: the head was trimmed past the offset: lost.
  Ids have gaps, so this alone cannot tell a trimmed head from the committed entry itself
  removed with nothing after it (``XDEL`` as entries are consumed, ``XTRIM MAXLEN 0``).
  On Redis 7.0+ the offsets record, per stream, how many entries were ever added up to
  the offset (``"@added"``, the offset's place in ``entries-added``); then
  ``entries-added - @added - length`` is exactly how many entries after the offset are
  gone whenever none up to it is left: 0 is no loss, more is the count. On 6.2 that case
  is a false alarm: trim with ``MAXLEN >= 1`` or ``MINID <= committed offset``;
* Redis 6.2: an ``XDEL`` between the first and the last entry is invisible.

Never loss: an offset of ``0-0`` (``earliest``: what was trimmed before the query read
anything is not its loss, as Kafka's ``earliest`` is the earliest available), and an
explicit ``startingPosition`` the query has not read past yet (the stream may not exist
yet, or begin later). ``latest`` starts at ``last-generated-id`` (``0-0`` for an empty
stream), so deletions before the query began are not reported either.

With ``failOnDataLoss=false`` each occurrence is counted once in the offsets the query
logs (``"@dataLoss": {stream: {"count": n, "entries": m, "mark": evidence}}``,
cumulative; ``entries`` sums the occurrences Redis 7.0+ could count), so it
shows in ``query.lastProgress["sources"][i]["endOffset"]``; the ``mark`` (the evidence
already reported) keeps the next planning from counting the same loss again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NOTHING = "0-0"
LOSS_KEY = "@dataLoss"  # in offsets: cumulative counts per stream
RESET_KEY = "@reset"  # in an end offset: streams read from 0-0 again (recreated)
FROM_KEY = "@from"  # in an end offset: where a stream read from 0-0 begins (for splits)
ADDED_KEY = "@added"  # Redis 7.0+: per stream, how many entries ever had an id <= the offset
CUTS_KEY = "@cuts"  # in an end offset: per stream, the ids its partitions end at
RESERVED = (LOSS_KEY, RESET_KEY, FROM_KEY, ADDED_KEY, CUTS_KEY)

log = logging.getLogger("enrich.spark.streams.source")


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


def fail_on_data_loss(options: Mapping[str, str]) -> bool:
    """The ``failOnDataLoss`` option: ``true`` (default) or ``false``, any case."""
    text = str(options.get("failOnDataLoss", "true")).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(
            f"option failOnDataLoss must be true or false, got {options['failOnDataLoss']!r}"
        )
    return text == "true"


@dataclass(frozen=True)
class Loss:
    """Entries after ``after`` in ``stream`` that no longer exist.

    Attributes:
        first: the first entry still present (None: the stream is empty or gone).
        evidence: what Redis showed, e.g. ``max-deleted-entry-id 12-0``; its ``mark`` is
            the id that identifies this occurrence (recorded so it is counted once).
        recreated: the stream was deleted and recreated below ``after``: read it again
            from its first entry.
    """

    stream: str
    after: str
    first: str | None
    reason: str
    mark: str
    recreated: bool = False
    entries: int | None = None  # how many, where Redis 7.0+ tells exactly

    def message(self) -> str:
        first = self.first if self.first is not None else "none"
        what = "entries" if self.entries is None else f"{self.entries} entries"
        return (
            f"redis-stream: data loss in stream {self.stream!r}: {what} after the committed "
            f"offset {self.after} no longer exist ({self.reason}); first entry still present: "
            f"{first}. Set failOnDataLoss=false to skip them and go on, or start a new query "
            f"(a new checkpoint) from the position you choose."
        )


class StreamDataLoss(RuntimeError):
    """A query would read past entries that were trimmed or deleted (``failOnDataLoss``)."""

    def __init__(self, loss: Loss) -> None:
        super().__init__(loss.message())
        self.loss = loss

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.loss,))


def _id(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):  # first-entry / last-entry: (id, fields)
        value = value[0] if value else None
        if value is None:
            return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _later(a: str | None, b: str | None) -> bool:
    """``a`` > ``b`` as entry ids (a missing ``a`` is never later)."""
    return a is not None and (b is None or parse_id(a) > parse_id(b))


def detect_loss(
    stream: str,
    after: str,
    info: Mapping[str, Any] | None,
    *,
    initial: bool = False,
    reported: str | None = None,
    added: int | None = None,
) -> Loss | None:
    """The loss of entries after ``after``, judged from ``XINFO STREAM`` (see module doc).

    Args:
        info: the ``XINFO STREAM`` reply (redis-py's dict), None when the key is gone.
        initial: ``after`` is the explicit ``startingPosition`` and nothing was read yet.
        reported: the mark of the last loss already counted for this stream, if any.
        added: Redis 7.0+, when known: how many entries were ever added with an id up
            to ``after`` (its place in ``entries-added``); makes a trim exact.
    """
    if initial or parse_id(after) == (0, 0):
        return None
    if info is None:
        mark = f"gone@{after}"
        if reported == mark:
            return None
        return Loss(stream, after, None, "the stream no longer exists", mark)
    first = _id(info.get("first-entry"))
    last = _id(info.get("last-entry"))
    generated = _id(info.get("last-generated-id")) or NOTHING
    if _later(after, generated):
        reason = f"the stream was deleted and recreated: its last id {generated} is before it"
        return Loss(stream, after, first, reason, f"reset@{generated}", recreated=True)
    total = info.get("entries-added")
    if added is not None and total is not None and int(total) < added:
        reason = f"the stream was deleted and recreated: it counts {total} entries ever added"
        return Loss(stream, after, first, reason, f"reset@{generated}", recreated=True)
    gone = _gone(info, after, first, added)
    if gone == 0:  # 7.0+, exact: every entry added after the offset is still there
        return None
    if "max-deleted-entry-id" in info:  # Redis 7.0+: XDEL (not trimming) sets it
        deleted = _id(info["max-deleted-entry-id"]) or NOTHING
        if _later(deleted, after) and _later(deleted, reported):
            reason = f"deleted up to {deleted} (max-deleted-entry-id)"
            return Loss(stream, after, first, reason, deleted, entries=gone)
    if _later(generated, after) and last != generated and _later(generated, reported):
        reason = f"the last entry, {generated}, was deleted or trimmed"
        return Loss(stream, after, first, reason, generated, entries=gone)
    if _later(first, after) and _later(first, reported):
        assert first is not None
        reason = f"the stream was trimmed past it: its first entry is {first}"
        return Loss(stream, after, first, reason, first, entries=gone)
    return None


def _gone(info: Mapping[str, Any], after: str, first: str | None, added: int | None) -> int | None:
    """How many entries added after ``after`` no longer exist, where Redis 7.0+ tells:
    when no entry up to ``after`` is left, every present one came after it."""
    total, length = info.get("entries-added"), info.get("length")
    if added is None or total is None or length is None:
        return None
    if first is not None and not _later(first, after):
        return None
    gone = int(total) - added - int(length)
    return gone if gone >= 0 else None  # recreated, or XSETID ... ENTRIESADDED


def stream_info(client: Any, stream: str) -> dict[str, Any] | None:
    """``XINFO STREAM`` of ``stream``, None when the key does not exist."""
    import redis

    try:
        info: dict[str, Any] = client.xinfo_stream(stream)
    except redis.ResponseError as exc:
        if "no such key" in str(exc).lower():
            return None
        raise
    return info


def loss_counts(offset: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``@dataLoss`` part of an offset (empty when nothing was lost)."""
    counts = offset.get(LOSS_KEY) or {}
    return {str(k): dict(v) for k, v in counts.items()}


def record(counts: dict[str, dict[str, Any]], loss: Loss) -> None:
    """Count ``loss`` once, in place, and log it (``failOnDataLoss=false``)."""
    entry = counts.setdefault(loss.stream, {"count": 0, "mark": None})
    entry["count"] = int(entry.get("count", 0)) + 1
    entry["mark"] = loss.mark
    if loss.entries is not None:
        entry["entries"] = int(entry.get("entries", 0)) + loss.entries
    log.warning("%s (skipped: failOnDataLoss=false)", loss.message())
