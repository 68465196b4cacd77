"""The source layout of a sink keyed by the source record, kept across restarts.

A writer keyed by the source record (``sourceIdColumn``) keeps one mark per source
stream: ``"*"`` for the one stream of a writer without ``sourceStreamColumn``, else each
stream's key (:mod:`~enrich.spark.sink.redis.two_phase.script`). Restarting a query under the
same checkpoint (the same writer identity) with other sources would leave those marks
unused: going from one stream to several, the new per-stream marks start empty and every
entry already published would be published again; from several to one, the same with
``"*"``; a stream renamed (or replaced) starts without a mark.

So when the query starts, :func:`check_layout` compares the layout the writer recorded
with the query's (``sourceStreamColumn`` or not, and the streams it reads, which
:func:`enrich.spark.low_latency` passes as ``sourceStreams``) and either carries the marks
over or refuses the start with :class:`SourceLayoutChanged`:

- one stream to several, the one stream among them: its ``"*"`` mark becomes its own;
- several to one, that one among them: its mark becomes ``"*"``;
- streams added or dropped: the others keep their marks; an added one starts empty (it
  was never published);
- refused: the change cannot be told from its marks (the streams are not known), a
  stream was dropped while another appeared (a rename or a replacement: its entries
  would be published again), or the one stream changed.

The layout is recorded under ``enrich:sink:<identity>:layout`` (``keyed``: whether
marks are per stream; ``streams``: the streams read, when known).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from enrich import EnrichError

from .state_keys import ONE_SOURCE, PREFIX, sources_key

# the streams the query reads, comma-separated (low_latency sets it)
STREAMS_OPTION = "sourceStreams"


class SourceLayoutChanged(EnrichError, ValueError):
    """The query's sources differ from those the writer published for under the same
    checkpoint, in a way whose marks cannot be carried over: the query is refused at its
    start, before anything is published. The message says what changed and the ways out."""


def layout_key(identity: str) -> str:
    return f"{PREFIX}:{identity}:layout"


def streams_of(options: Mapping[str, str]) -> tuple[str, ...]:
    """``sourceStreams``: the stream keys the query reads (empty: not known)."""
    text = str(options.get(STREAMS_OPTION, ""))
    return tuple(s.strip() for s in text.split(",") if s.strip())


# KEYS: marks, layout. ARGV: 1 a JSON object of marks to carry {to: from}, 2 a JSON list
# of fields to delete, 3 the layout's "keyed", 4 its "streams" (JSON). Atomic, so a
# concurrent commit never sees half the carry.
_CARRY = """
local marks = redis.call('HGETALL', KEYS[1])
local have = {}
for i = 1, #marks, 2 do have[marks[i]] = marks[i + 1] end
for to, from in pairs(cjson.decode(ARGV[1])) do
  if have[from] then redis.call('HSET', KEYS[1], to, have[from]) end
end
for _, field in ipairs(cjson.decode(ARGV[2])) do redis.call('HDEL', KEYS[1], field) end
redis.call('HSET', KEYS[2], 'keyed', ARGV[3], 'streams', ARGV[4])
return 1
"""


def check_layout(
    client: Any, identity: str, *, by_stream: bool, streams: Sequence[str]
) -> dict[str, str]:
    """Carry the marks over to the query's layout, or refuse it (see the module
    docstring). Returns the marks carried, ``{to: from}``.

    Args:
        client: a synchronous redis client.
        identity: the writer's identity.
        by_stream: the query names ``sourceStreamColumn`` (a mark per stream).
        streams: the streams the query reads (empty: not known).

    Raises:
        SourceLayoutChanged: the change cannot be carried over without doubling or
            losing entries.
    """
    marks = {_text(k) for k in client.hkeys(sources_key(identity))}
    raw = client.hget(layout_key(identity), "streams")
    recorded = [str(s) for s in json.loads(_text(raw or b"[]"))]
    now = sorted(set(streams))
    carry: dict[str, str] = {}
    drop: list[str] = []

    def refuse(what: str) -> SourceLayoutChanged:
        return SourceLayoutChanged(
            f"redis sink: the query's sources changed under the same checkpoint ({what}); "
            "its marks of what was published cannot be carried over, so entries would be "
            "published twice or skipped. Nothing was published. Start the query with its "
            "former sources, or with a new checkpointLocation (a new writer: it publishes "
            "from the source offsets of that checkpoint)"
        )

    if marks:
        if by_stream and ONE_SOURCE in marks:  # one stream -> several
            if len(recorded) != 1:
                raise refuse(
                    "it read one stream, whose name was not recorded, and now reads "
                    f"{len(now) or 'several'} by {_shown(now)}: set {STREAMS_OPTION}"
                )
            if now and recorded[0] not in now:
                raise refuse(f"it read stream {recorded[0]!r}, now {_shown(now)}")
            carry[recorded[0]], drop = ONE_SOURCE, [ONE_SOURCE]
        elif not by_stream and ONE_SOURCE not in marks:  # several -> one
            if len(now) != 1 or now[0] not in marks:
                raise refuse(
                    f"it read streams {_shown(sorted(marks))}, a mark each, and now reads "
                    f"one stream without sourceStreamColumn: {_shown(now)}, not one of them"
                    + ("" if now else f" (set {STREAMS_OPTION})")
                )
            carry[ONE_SOURCE] = now[0]
        elif recorded and now:
            gone, new = set(recorded) - set(now), set(now) - set(recorded)
            if not by_stream and recorded != now:
                raise refuse(f"its one stream was {recorded[0]!r}, now {now[0]!r}")
            if by_stream and gone and new:
                raise refuse(
                    f"streams {_shown(sorted(gone))} are gone and {_shown(sorted(new))} "
                    "appeared: a stream renamed or replaced would be published again"
                )
    layout_streams = now or (recorded if not carry else [])
    client.eval(
        _CARRY,
        2,
        sources_key(identity),
        layout_key(identity),
        json.dumps(carry),
        json.dumps(drop),
        "1" if by_stream else "0",
        json.dumps(layout_streams),
    )
    return carry


def _shown(streams: Sequence[str]) -> str:
    return ", ".join(repr(s) for s in streams) if streams else "(streams not named)"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
