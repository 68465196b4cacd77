"""Publishing from the tasks (``publishFrom=tasks``): the sink keyed by the source record
without staging, and a commit that only settles the marks.

Keyed by the source record (:mod:`.script`), the driver's commit publishes each staged
row after its stream's mark. That commit is serial and off the tasks: every micro-batch
waits, after its last task, for a driver-side Python process to copy each staged row
into the target (measured: 30-400 ms of a micro-batch of ~3,000-10,000 rows, each row
written into Redis twice). Here each task publishes its own rows, in atomic chunks
(:data:`PUBLISH_SCRIPT`, one script a step of at most ``maxRowsPerCommit`` rows, 1,000 by
default), and the driver's commit (:data:`SETTLE_SCRIPT`) only raises the marks.

What keeps each source entry published once, whatever task or batch carries it:

- **Spans.** Besides the marks (per source stream, everything at or below is published),
  each task attempt records the span of entry ids it has published, per stream, in the
  same script as the rows: ``[lo, hi]`` in the pending hash, under its (run, batch,
  partition). A span covers the ids between its rows too: a source partition is a
  contiguous range of a stream, so the ids between two rows of one task are rows the
  query dropped (an inner join's miss, a filter), never rows of another task.
- **A row is published** when its entry id is after its stream's mark and inside no span
  of its stream. A retried task attempt, or a batch re-cut after a restart (async
  progress tracking plans the batches again from the last offsets it logged), skips
  what any attempt already published: the spans say so.
- **The commit** of batch ``b`` (every task of it succeeded) raises each stream's mark to
  the highest id of the spans its tasks name in their commit messages, and deletes the
  spans at or below the marks; spans a crashed run left above them stay until a later
  batch passes them (its first batch may be cut shorter than the dead one's).
- **What it needs of the rows**, checked by the script before it writes anything: each
  task's rows of a stream in entry-id order (an ordered stage: ``lookup_join`` and
  ``async_map`` keep their input's order by default), and no two tasks of one batch
  holding interleaved ids of one stream (a shuffle between the source and the sink). A
  chunk breaking either fails its task, naming what it found, before it writes a row.
  A 1:N join's rows share their entry id: a chunk never splits them (the script leaves
  the last entry's rows to the next chunk).

What readers see: a task's rows as its chunks land, before the batch commits; a batch
that fails leaves the chunks its tasks published (its replay skips them), so readers may
see part of a batch early, never a row twice.

State (besides the marks, ``enrich:sink:<identity>:sources``)::

    enrich:sink:<identity>:pending    field "<stream>\\x1f<run>\\x1f<batch>\\x1f<partition>",
                                      value "<lo> <hi> <attempt> <last>"
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...sink_spi import SourceFields
from .errors import SourceIdMissing, SourceOrderBroken
from .publish import _operation, _text
from .script import SOURCE_HELPERS
from .state_keys import pending_key, sources_key

# A field of the pending hash: stream, run, batch, partition (the stream first: it may
# hold anything but the separator; the run, batch and partition never hold it).
SEPARATOR = "\x1f"
# Operations a script publishes at most: measured, a script's Redis time a row grows
# with its size (2.4 us a row at 1,500 rows, 8.3 at 5,000: Lua's garbage of the decoded
# rows), and readers and the other tasks wait for each script.
STEP = 1_000


# The Lua both scripts share to read a span's field: its stream, run, batch and partition.
SPAN_FIELD = """
local SEP = '\\31'
local FIELD = '^(.*)' .. SEP .. '([^' .. SEP .. ']*)' .. SEP .. '([^' .. SEP .. ']*)' ..
  SEP .. '([^' .. SEP .. ']*)$'
local function span_field(f) return string.match(f, FIELD) end
"""

# KEYS: 1 sources (the marks), 2 pending (the spans).
# ARGV: 1 the source id field, 2 the source stream field(s), 3 run, 4 batch,
# 5 partition, 6 attempt, 7 "1" for the task's last chunk, then the packed operations.
# Returns {state, processed, applied, replayed, detail}:
#   state 0: the first `processed` operations were processed (`applied` published,
#            `replayed` skipped as published already); the rest (the last entry's rows,
#            unless last) are for the next call; then the streams whose spans it wrote;
#   state -3: operation `detail` has no source id or stream: nothing written;
#   state -5: out of order: `detail` is "<stream> <id> <earlier id>"; nothing written;
#   state -6: interleaved with another task: `detail` is "<stream> <lo> <hi> <partition>
#             <its lo> <its hi>"; nothing written.
PUBLISH_SCRIPT = (
    """
local idf, sf = ARGV[1], ARGV[2]
local run, batch, part, attempt = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local last_chunk = ARGV[7] == '1'
local FIRST = 8
"""
    + SOURCE_HELPERS
    + SPAN_FIELD
    + """
local n = #ARGV - FIRST + 1
local ops, ss, ids, mss, seqs = {}, {}, {}, {}, {}
for i = 1, n do
  local item = ARGV[FIRST + i - 1]
  local op = decode(item)
  local s, id = source_of(op)
  local ms, seq = parts(id)
  if s == nil or ms == nil then return {-3, 0, 0, 0, item} end
  ops[i], ss[i], ids[i], mss[i], seqs[i] = op, s, id, ms, seq
end
-- the last entry of each stream may have more rows in the next chunk: left to it
local cut = n
if not last_chunk then
  local group = {}
  for i = 1, n do
    local g = group[ss[i]]
    if g == nil or ids[g] ~= ids[i] then group[ss[i]] = i end
  end
  for _, g in pairs(group) do
    if g - 1 < cut then cut = g - 1 end
  end
end
if cut == 0 then return {0, 0, 0, 0, ''} end
local marks = {}
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  local ms, seq = parts(flat[i + 1])
  marks[flat[i]] = {ms, seq}
end
local spans, own = {}, {}
flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do
  local s, r, b, p = span_field(flat[i])
  local lo, hi, att, last = string.match(flat[i + 1], '^(%S+) (%S+) (%S+) (%S+)$')
  if s and lo then
    local sp = {field = flat[i], lo = lo, hi = hi, att = att, last = last, run = r,
                batch = b, part = p}
    sp.lo_ms, sp.lo_seq = parts(lo)
    sp.hi_ms, sp.hi_seq = parts(hi)
    spans[s] = spans[s] or {}
    table.insert(spans[s], sp)
    if r == run and b == batch and p == part then own[s] = sp end
  end
end
-- checked before anything is written: each stream's rows in order, no other task's
-- span of this batch across them
local first, top = {}, {}
for i = 1, cut do
  local s = ss[i]
  local prev = top[s]
  if prev == nil and own[s] and own[s].att == attempt then
    local pms, pseq = parts(own[s].last)
    prev = {pms, pseq, own[s].last}
  end
  if prev and after(prev[1], prev[2], mss[i], seqs[i]) then
    return {-5, 0, 0, 0, s .. ' ' .. ids[i] .. ' ' .. prev[3]}
  end
  if first[s] == nil then first[s] = {mss[i], seqs[i], ids[i]} end
  top[s] = {mss[i], seqs[i], ids[i]}
end
for s, f in pairs(first) do
  local t = top[s]
  for _, sp in ipairs(spans[s] or {}) do
    if sp.run == run and sp.batch == batch and sp.part ~= part
       and not after(f[1], f[2], sp.hi_ms, sp.hi_seq)
       and not after(sp.lo_ms, sp.lo_seq, t[1], t[2]) then
      return {-6, 0, 0, 0, table.concat({s, f[3], t[3], sp.part, sp.lo, sp.hi}, ' ')}
    end
  end
end
local applied, replayed = 0, 0
for i = 1, cut do
  local s, ms, seq = ss[i], mss[i], seqs[i]
  local m = marks[s]
  local fresh = m == nil or after(ms, seq, m[1], m[2])
  if fresh then
    for _, sp in ipairs(spans[s] or {}) do
      if not after(sp.lo_ms, sp.lo_seq, ms, seq) and not after(ms, seq, sp.hi_ms, sp.hi_seq) then
        fresh = false
        break
      end
    end
  end
  if fresh then
    if not apply(unpack(ops[i])) then
      return redis.error_reply('unknown staged operation ' .. tostring(ops[i][1]))
    end
    applied = applied + 1
  else
    replayed = replayed + 1
  end
end
for s, f in pairs(first) do
  local t, sp = top[s], own[s]
  local lo, hi = f[3], t[3]
  if sp then
    if after(f[1], f[2], sp.lo_ms, sp.lo_seq) then lo = sp.lo end
    if after(sp.hi_ms, sp.hi_seq, t[1], t[2]) then hi = sp.hi end
  end
  redis.call('HSET', KEYS[2], table.concat({s, run, batch, part}, SEP),
             table.concat({lo, hi, attempt, t[3]}, ' '))
end
local reply = {0, cut, applied, replayed, ''}
for s, _ in pairs(first) do table.insert(reply, s) end
return reply
"""
)

# KEYS: 1 sources (the marks), 2 pending (the spans). ARGV: the spans a batch's tasks
# wrote (their fields), as their commit messages name them.
# Every task of the batch succeeded: each stream's mark rises to the highest id those
# spans reached, and every span at or below its stream's mark is deleted.
# Returns {marks raised, spans deleted, spans left}.
SETTLE_SCRIPT = (
    """
local idf, sf = '', ''
"""
    + SOURCE_HELPERS
    + SPAN_FIELD
    + """
local tops = {}
for i = 1, #ARGV do
  local s = span_field(ARGV[i])
  local value = redis.call('HGET', KEYS[2], ARGV[i])
  local hi = value and string.match(value, '^%S+ (%S+)')
  if s and hi then
    local ms, seq = parts(hi)
    local t = tops[s]
    if t == nil or after(ms, seq, t[1], t[2]) then tops[s] = {ms, seq, hi} end
  end
end
local raised = 0
for s, t in pairs(tops) do
  local cms, cseq = parts(redis.call('HGET', KEYS[1], s))
  if after(t[1], t[2], cms, cseq) then
    redis.call('HSET', KEYS[1], s, t[3])
    raised = raised + 1
  end
end
local flat = redis.call('HGETALL', KEYS[2])
local deleted, left = 0, 0
for i = 1, #flat, 2 do
  local s = span_field(flat[i])
  local hms, hseq = parts(string.match(flat[i + 1], '^%S+ (%S+)'))
  local mms, mseq = parts(redis.call('HGET', KEYS[1], s or ''))
  if mms ~= nil and hms ~= nil and not after(hms, hseq, mms, mseq) then
    redis.call('HDEL', KEYS[2], flat[i])
    deleted = deleted + 1
  else
    left = left + 1
  end
end
return {raised, deleted, left}
"""
)


@dataclass(frozen=True)
class TaskPublished:
    """What one task attempt published: rows written, rows skipped as published by an
    earlier attempt or batch, and the spans it wrote (fields of the pending hash, for
    the commit to settle)."""

    rows: int
    replayed: int
    spans: tuple[str, ...] = ()


def publish(
    client: Any,
    identity: str,
    source: SourceFields,
    task: tuple[str, str, int, str],
    chunks: Iterable[list[bytes]],
    *,
    step: int = STEP,
    after_chunk: Any = None,
) -> TaskPublished:
    """Publish a task's packed operations (chunks in the task's order) keyed by their
    source records: one atomic script a chunk, each skipping what is published already
    and recording its span (see the module).

    Args:
        task: (run, batch, partition, attempt): ``run`` names the query's run (a new
            one at each start), ``attempt`` this task attempt.
        step: the most operations one script publishes (an entry with more rows goes
            out whole in one).
        after_chunk: called after each chunk's script (a test hook).

    Raises:
        SourceIdMissing: a row has no source entry id or stream.
        SourceOrderBroken: out of order, or interleaved with another task (see above).
    """
    script = client.register_script(PUBLISH_SCRIPT)  # EVALSHA: loaded once per server
    run, batch, partition, attempt = task
    keys = [sources_key(identity), pending_key(identity)]
    head = [source.id, source.stream, run, batch, str(partition), attempt]
    pending: list[bytes] = []
    rows = replayed = 0
    spans: set[str] = set()
    stream = iter(chunks)
    more = True
    while more or pending:
        if more and len(pending) <= step:
            chunk = next(stream, None)
            if chunk is None:
                more = False
            else:
                pending += chunk
                continue
        last = not more and len(pending) <= step
        state, done, applied, skipped, detail, *streams = script(
            keys=keys, args=[*head, "1" if last else "0", *pending[:step]]
        )
        state = int(state)
        if state == -3:
            raise SourceIdMissing(batch, source.id, _operation(detail))
        if state in (-5, -6):
            raise _broken(state, _text(detail), batch, partition)
        if not int(done) and not last:  # one entry's rows fill the step: take them all
            step = len(pending)
            continue
        pending = pending[int(done) :]
        rows += int(applied)
        replayed += int(skipped)
        spans.update(SEPARATOR.join([_text(s), run, batch, str(partition)]) for s in streams)
        if after_chunk is not None and int(done):
            after_chunk(TaskPublished(rows, replayed))
    return TaskPublished(rows, replayed, tuple(sorted(spans)))


def settle(client: Any, identity: str, spans: Iterable[str]) -> tuple[int, int, int]:
    """The commit of a batch whose tasks all succeeded, given the spans they wrote (from
    their commit messages): raise the marks past them, drop the spans the marks cover.
    Returns (marks raised, spans deleted, spans left above the marks)."""
    script = client.register_script(SETTLE_SCRIPT)
    keys = [sources_key(identity), pending_key(identity)]
    raised, deleted, left = script(keys=keys, args=list(spans))
    return int(raised), int(deleted), int(left)


def unsettled(client: Any, identity: str) -> int:
    """How many spans of a run that published from its tasks no commit settled."""
    return int(client.hlen(pending_key(identity)))


def _broken(state: int, detail: str, batch: str, partition: int) -> SourceOrderBroken:
    words = detail.split(" ")
    cut = len(words) - (2 if state == -5 else 5)  # the stream's name may hold spaces
    stream, rest = " ".join(words[:cut]), words[cut:]
    if state == -5:
        what = (
            f"entry id {rest[0]} came after {rest[1]}: the rows are not in the source's "
            'order (an unordered stage, such as lookup_join(mode="unordered"), or a sort)'
        )
    else:
        what = (
            f"its rows (ids {rest[0]} to {rest[1]}) interleave with those of partition "
            f"{rest[2]} ({rest[3]} to {rest[4]}): a shuffle (repartition, a join, a "
            "groupBy) spread one source range over several tasks"
        )
    return SourceOrderBroken(batch, partition, stream, what)
