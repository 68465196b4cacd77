"""The Lua scripts of the two-phase commit: a batch published in bounded steps, and the
abort that deletes staging.

:data:`STEP_SCRIPT` publishes a batch in steps, each one Redis script (so each atomic),
each processing at most ``step`` operations. The first step fixes the **plan**: it checks
that each staging list holds the number of operations its task reported (``LLEN``
against the count the commit passes in; a list short or gone makes it publish nothing,
record nothing and delete nothing), then records the plan in the publishing hash (the
batch, its staging lists and their counts, a cursor: list and position). Every step
processes the operations after the cursor and advances the cursor in the same script, so
an operation is applied once whatever dies between two steps. The last step sets the
committed marker, deletes the plan and the batch's staging, and deletes what crashed
attempts left.

**Keyed by batch id** (the default): a batch id at or below the marker is skipped (its
staging only deleted); a step that finds a plan of its own batch follows that plan from
its cursor, whatever staging lists it was given (Spark replays a batch whose commit died
with new task attempts, which stage the same rows in new lists); a plan of another batch
is a conflict.

**Keyed by the source record** (``sourceIdColumn``): each staged row carries its source
entry id (a field of the row, ``<ms>-<seq>``, or a whole number such as a Kafka offset,
compared as ``<n>-0``) and, with ``sourceStreamColumn``, its source stream (one field,
or several comma-separated whose values are joined by ``/``: a Kafka topic and
partition). The writer keeps, per source stream, the last entry id it published (its
high-water mark). A plan records the marks as they were when it was fixed, and applies
only the rows whose entry id is after its stream's mark; the last step raises each mark
to the largest id the plan held. Batch ids are not trusted (a batch re-cut after a
restart may carry another id, or the same id with other rows): the marker never skips a
batch, and a plan left by any earlier commit is finished first, then the given lists are
published under a plan of their own. Since a source batch is a contiguous range of
entries starting at or before the mark, "after the mark" is exactly "not published yet",
and a row published once is never published again, whatever batch carries it. A 1:N
join's rows share their entry id: they are all after the mark or all behind it.

A list the commit knows to hold one source stream's rows in entry-id order (its
**range**, ``[stream, first id]``, from the task that staged it:
:mod:`~enrich.spark.sink.redis.source_range`; kept in the plan) is checked once: when its
first id is after the stream's mark (the plan's), every row of it is, and its rows are
applied without reading their source entries; the last row of each page, the furthest,
is read first and raises the plan's largest ids as each row would. A list without a
range, or whose first id is not after its mark (a replay), is checked row by row.
"""

from __future__ import annotations

# The Lua both publishing scripts share (this one and the tasks' publish,
# :mod:`.from_tasks`): entry ids split and compared as decimal text, a staged operation
# decoded and applied, and its source stream and id read from its fields. They read the
# locals ``idf`` (the source id field) and ``sf`` (the source stream fields).
SOURCE_HELPERS = """local function parts(id)
  if type(id) ~= 'string' then return nil, nil end
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  if ms == nil and string.match(id, '^%d+$') then return id, '0' end -- an offset: n-0
  return ms, seq
end
-- a field's value as text: JSON documents give numbers (offsets, partitions)
local function text(v)
  if type(v) == 'number' then return string.format('%.0f', v) end
  return v
end
-- the source stream fields: none, one, or several (a kafka topic and partition)
local sfs, at = {}, {}
for name in string.gmatch(sf, '[^,]+') do
  sfs[#sfs + 1] = name
  at[name] = #sfs
end
-- (ams, aseq) after (bms, bseq) as entry ids, compared as decimal text; nothing: true
local function after(ams, aseq, bms, bseq)
  if bms == nil then return true end
  if #ams ~= #bms then return #ams > #bms end
  if ams ~= bms then return ams > bms end
  if #aseq ~= #bseq then return #aseq > #bseq end
  return aseq > bseq
end
-- a staged operation's items: MessagePack strings one after the other (codec.pack), or a
-- JSON array (what an earlier version staged: a plan it started resumes here)
local mp_unpack = cmsgpack.unpack
local function decode(item)
  if string.byte(item, 1) == 91 then return cjson.decode(item) end
  return {mp_unpack(item)}
end
-- apply one operation from its items (no table: cmsgpack's values go straight to the
-- command); false for an unknown kind
local function apply(kind, key, ...)
  if kind == 'x' then
    redis.call('XADD', key, '*', ...)
  elseif kind == 'h' then
    redis.call('DEL', key)
    if select('#', ...) > 0 then redis.call('HSET', key, ...) end
  elseif kind == 's' then
    redis.call('SET', key, (...))
  else
    return false
  end
  return true
end
local function source_of(op)
  local id
  local s = nil
  local values = {}
  if sf == '' then s = '*' end
  if op[1] == 's' then
    local ok, doc = pcall(cjson.decode, op[3])
    if ok and type(doc) == 'table' then
      id = text(doc[idf])
      for i, name in ipairs(sfs) do values[i] = text(doc[name]) end
    end
  else
    for i = 3, #op - 1, 2 do
      local name = op[i]
      if name == idf then id = op[i + 1] end
      if at[name] then values[at[name]] = op[i + 1] end
    end
  end
  if #sfs > 0 then
    for i = 1, #sfs do
      if type(values[i]) ~= 'string' then return nil, id end
    end
    s = table.concat(values, '/')
  end
  return s, id
end
"""

# KEYS: marker, index, plan, sources (the marks), started (the plan's lasting trace),
# staging lists of this commit.
# ARGV: 1 batch id (or token), 2 marked ("1": check and set the marker), 3 staging
# prefix, 4 this batch's own staging prefix, 5 page size, 6 step (most operations this
# script processes; 0: no bound), 7 ttl of the plan in seconds (0: none), 8 the source
# id field ("": keyed by batch id), 9 the source stream field(s), comma-separated ("":
# one source stream),
# then the number of operations each staging list must hold, in KEYS order, then
# (keyed by source, optional) each list's range: "" or [stream, first id] as JSON.
# Returns {state, applied, n, found, published, cleaned, replayed, detail[, unchecked]}:
#   state 0: a step ran, applied operations (replayed: skipped as published already);
#            n = 1 when it was the last, 2 when it finished an earlier commit's plan and
#            the given lists are still to publish; found = 1 when it followed an
#            earlier commit's plan; published = the plan's applied total so far;
#   state 1: the batch id is at or below the marker: skipped;
#   state -1: staging list n of the plan holds `found` operations, not its count:
#            nothing of this step applied (published: what earlier steps applied);
#   state -2: the plan is batch `published` (a string): another batch's;
#   state -3: keyed by source: operation `detail` has no source id; the steps before it
#            stand, the cursor is on it;
#   state -4: a plan was started (its trace says batch `detail`, `published` operations
#            applied) but the plan is gone: it expired with its staging lists.
# `cleaned`: leftover staging lists the last step (or a skip) deleted; `unchecked` (state
# 0): operations applied without their source check (their list's range was after its
# mark).
STEP_SCRIPT = (
    """
local batch, marked = ARGV[1], ARGV[2] == '1'
local idf, sf = ARGV[8], ARGV[9]
local keyed = idf ~= ''
local plan, sources, started = KEYS[3], KEYS[4], KEYS[5]
local FIRST = 6
local ttl = tonumber(ARGV[7])
local b = tonumber(batch)
local function clean(keep)
  local cleaned = 0
  local prefix_len = string.len(ARGV[3])
  local own_len = string.len(ARGV[4])
  for _, member in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    if not keep[member] then
      local gone = keyed or string.sub(member, 1, own_len) == ARGV[4]
      if not gone and marked and b then
        local mb = tonumber(string.match(string.sub(member, prefix_len + 1), '^(%d+):'))
        gone = mb ~= nil and mb <= b
      end
      if gone then
        redis.call('UNLINK', member)
        redis.call('SREM', KEYS[2], member)
        cleaned = cleaned + 1
      end
    end
  end
  return cleaned
end
"""
    + SOURCE_HELPERS
    + """if marked and not keyed then
  local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
  if b <= last then
    local cleaned = clean({})
    return {1, 0, cleaned, 0, 0, cleaned, 0, ''}
  end
end
local lists, counts, li, pos, published, marks
local ranges = {}
local seen = {}
local resumed, foreign = 0, 0
local planned = redis.call('HGET', plan, 'batch')
if not planned and marked and redis.call('EXISTS', started) == 1 then
  local was = redis.call('HMGET', started, 'batch', 'published')
  return {-4, 0, 0, 0, tonumber(was[2] or '0'), 0, 0, was[1] or ''}
end
if planned then
  if planned ~= batch and not keyed then return {-2, 0, 0, 0, planned, 0, 0, ''} end
  lists = cjson.decode(redis.call('HGET', plan, 'lists'))
  counts = cjson.decode(redis.call('HGET', plan, 'counts'))
  li = tonumber(redis.call('HGET', plan, 'list'))
  pos = tonumber(redis.call('HGET', plan, 'pos'))
  published = tonumber(redis.call('HGET', plan, 'published'))
  resumed = 1
  if keyed then
    local fixed = redis.call('HGET', plan, 'marks')
    if fixed then marks = cjson.decode(fixed) end
    seen = cjson.decode(redis.call('HGET', plan, 'seen') or '{}')
    ranges = cjson.decode(redis.call('HGET', plan, 'ranges') or '[]')
    if #lists ~= #KEYS - FIRST + 1 then foreign = 1 end
    for i = 1, #lists do
      if lists[i] ~= KEYS[FIRST + i - 1] then foreign = 1 end
    end
  end
else
  lists, counts = {}, {}
  local given = #KEYS - FIRST + 1
  for i = FIRST, #KEYS do
    lists[#lists + 1] = KEYS[i]
    counts[#counts + 1] = tonumber(ARGV[i - FIRST + 10])
    ranges[#ranges + 1] = ARGV[i - FIRST + 10 + given] or ''
  end
  li, pos, published = 1, 0, 0
end
for i = li, #lists do
  local found = redis.call('LLEN', lists[i])
  if found ~= counts[i] then return {-1, 0, i, found, published, 0, 0, ''} end
end
-- the marks and the largest ids seen, split once: (ms, seq) text per stream
local mark_ms, mark_seq, top_ms, top_seq = {}, {}, {}, {}
if keyed then
  if marks == nil then
    marks = {}
    local flat = redis.call('HGETALL', sources)
    for i = 1, #flat, 2 do marks[flat[i]] = flat[i + 1] end
  end
  for s, id in pairs(marks) do mark_ms[s], mark_seq[s] = parts(id) end
  for s, id in pairs(seen) do top_ms[s], top_seq[s] = parts(id) end
end
-- a list whose rows are of one stream in entry-id order (its range: [stream, first id],
-- from the task that staged it) and whose first id is after that stream's mark holds
-- only rows after the mark: applied without each row's check
local quick = {}
if keyed then
  for i = 1, #lists do
    local r = ranges[i]
    if type(r) == 'string' and r ~= '' then
      local ok, pair = pcall(cjson.decode, r)
      if ok and type(pair) == 'table' and type(pair[1]) == 'string'
          and type(pair[2]) == 'string' then
        local ms, seq = parts(pair[2])
        if ms ~= nil and after(ms, seq, mark_ms[pair[1]], mark_seq[pair[1]]) then
          quick[i] = true
        end
      end
    end
  end
end
local step = tonumber(ARGV[6])
if step <= 0 then step = math.huge end
local page = tonumber(ARGV[5])
local applied, replayed, done, unchecked = 0, 0, 0, 0
local bad = nil
while li <= #lists and done < step and not bad do
  local want = math.min(page, step - done, counts[li] - pos)
  if want > 0 then
    local items = redis.call('LRANGE', lists[li], pos, pos + want - 1)
    local check = keyed
    local last_s, last_id, last_ms, last_seq
    if keyed and quick[li] and #items > 0 then
      -- the page's last row is its furthest: read it first; without a source, check all
      last_s, last_id = source_of(decode(items[#items]))
      last_ms, last_seq = parts(last_id)
      if last_s ~= nil and last_ms ~= nil then check = false end
    end
    for k, item in ipairs(items) do
      local op = nil
      local fresh = true
      if check or string.byte(item, 1) == 91 then op = decode(item) end
      if check then
        local s, id = source_of(op)
        local ms, seq = parts(id)
        if s == nil or ms == nil then
          bad = item
          want = k - 1
          break
        end
        if not after(ms, seq, mark_ms[s], mark_seq[s]) then fresh = false end
        if after(ms, seq, top_ms[s], top_seq[s]) then
          seen[s], top_ms[s], top_seq[s] = id, ms, seq
        end
      end
      if not fresh then
        replayed = replayed + 1
      else
        local ok
        if op then ok = apply(unpack(op)) else ok = apply(mp_unpack(item)) end
        if not ok then
          return redis.error_reply('unknown staged operation ' .. tostring(decode(item)[1]))
        end
        applied = applied + 1
      end
    end
    if keyed and not check then
      if after(last_ms, last_seq, top_ms[last_s], top_seq[last_s]) then
        seen[last_s], top_ms[last_s], top_seq[last_s] = last_id, last_ms, last_seq
      end
      unchecked = unchecked + #items
    end
    pos = pos + want
    done = done + want
  end
  if pos >= counts[li] then li, pos = li + 1, 0 end
end
published = published + applied
local function save()
  if resumed == 0 then
    redis.call('HSET', plan, 'batch', batch, 'lists', cjson.encode(lists),
               'counts', cjson.encode(counts))
    if keyed then
      redis.call('HSET', plan, 'marks', cjson.encode(marks), 'ranges', cjson.encode(ranges))
    end
  end
  redis.call('HSET', plan, 'list', li, 'pos', pos, 'published', published)
  if keyed then redis.call('HSET', plan, 'seen', cjson.encode(seen)) end
  if ttl > 0 then
    -- The plan and the lists it still reads live and expire together: one TTL, set
    -- and refreshed by the same script (a script sees one frozen clock, so no later
    -- script finds one of them expired and not the other).
    redis.call('EXPIRE', plan, ttl)
    for i = li, #lists do redis.call('EXPIRE', lists[i], ttl) end
  end
  if marked then
    -- The trace that outlives them (no TTL): what the plan had published, so that the
    -- next commit names an expired plan instead of publishing its batch again.
    redis.call('HSET', started, 'batch', batch, 'published', published)
    if keyed then redis.call('HSET', started, 'seen', cjson.encode(seen)) end
  end
end
if bad then
  save()
  return {-3, applied, 0, resumed, published, 0, replayed, bad}
end
if li <= #lists then
  save()
  return {0, applied, 0, resumed, published, 0, replayed, '', unchecked}
end
if keyed then
  for s, id in pairs(seen) do
    if after(top_ms[s], top_seq[s], parts(redis.call('HGET', sources, s))) then
      redis.call('HSET', sources, s, id)
    end
  end
end
if marked and not keyed then redis.call('SET', KEYS[1], batch) end
for i = 1, #lists do
  redis.call('UNLINK', lists[i])
  redis.call('SREM', KEYS[2], lists[i])
end
redis.call('DEL', plan)
redis.call('DEL', started)
if foreign == 1 then
  local keep = {}
  for i = FIRST, #KEYS do keep[KEYS[i]] = true end
  return {0, applied, 2, resumed, published, clean(keep), replayed, '', unchecked}
end
return {0, applied, 1, resumed, published, clean({}), replayed, '', unchecked}
"""
)

# KEYS: index, plan, staging lists named in the messages. ARGV: this batch's staging
# prefix, batch id (or token), "1" to discard a started plan of this batch too (batch
# writes: nothing resumes them). Deletes this batch's staging except, unless discarded,
# the lists of a plan that started publishing it (its replay resumes them). The lists of
# a plan of another batch are never named here (they are another batch's).
# Returns {lists deleted, 1 if a plan of this batch is kept, its published operations}.
ABORT_SCRIPT = """
local keep = {}
local kept, published = 0, 0
if redis.call('HGET', KEYS[2], 'batch') == ARGV[2] then
  published = tonumber(redis.call('HGET', KEYS[2], 'published') or '0')
  if ARGV[3] == '1' then
    for _, name in ipairs(cjson.decode(redis.call('HGET', KEYS[2], 'lists'))) do
      redis.call('UNLINK', name)
      redis.call('SREM', KEYS[1], name)
    end
    redis.call('DEL', KEYS[2])
  else
    for _, name in ipairs(cjson.decode(redis.call('HGET', KEYS[2], 'lists'))) do
      keep[name] = true
    end
    kept = 1
  end
end
local deleted = 0
for i = 3, #KEYS do
  if not keep[KEYS[i]] then
    deleted = deleted + redis.call('UNLINK', KEYS[i])
    redis.call('SREM', KEYS[1], KEYS[i])
  end
end
for _, member in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if string.sub(member, 1, string.len(ARGV[1])) == ARGV[1] and not keep[member] then
    deleted = deleted + redis.call('UNLINK', member)
    redis.call('SREM', KEYS[1], member)
  end
end
return {deleted, kept, published}
"""

# KEYS: marker, index, plan, sources (the marks), started (the plan's lasting trace).
# ARGV: 1 "1" when keyed by the source record.
# The way out of a plan that cannot finish (its staging lists expired or were lost): it
# is closed as if its batch had been published whole, so that nothing of it is published
# again. Keyed by batch id, the marker rises to the plan's batch (its replay is then
# skipped); keyed by the source record, each mark rises to the largest entry id the plan
# had reached (the replay publishes only entries after it). The plan, the lists it still
# names and its trace are deleted. A plan whose lists are all there is left alone: its
# replay finishes it.
# Returns {state, batch, published}: state 1 closed, 0 nothing to close, -1 the plan is
# whole (not closed).
CLOSE_SCRIPT = """
local keyed = ARGV[1] == '1'
local plan, sources, started = KEYS[3], KEYS[4], KEYS[5]
local batch = redis.call('HGET', plan, 'batch')
local published, seen
if batch then
  local lists = cjson.decode(redis.call('HGET', plan, 'lists'))
  local counts = cjson.decode(redis.call('HGET', plan, 'counts'))
  local li = tonumber(redis.call('HGET', plan, 'list'))
  local whole = true
  for i = li, #lists do
    if redis.call('LLEN', lists[i]) ~= counts[i] then whole = false end
  end
  published = redis.call('HGET', plan, 'published')
  if whole then return {-1, batch, published} end
  seen = redis.call('HGET', plan, 'seen')
  for i = 1, #lists do
    redis.call('UNLINK', lists[i])
    redis.call('SREM', KEYS[2], lists[i])
  end
else
  local was = redis.call('HMGET', started, 'batch', 'published', 'seen')
  if not was[1] then return {0, '', '0'} end
  batch, published, seen = was[1], was[2], was[3]
end
if keyed then
  for s, id in pairs(cjson.decode(seen or '{}')) do
    local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
    local cur = redis.call('HGET', sources, s)
    local cms, cseq = nil, nil
    if cur then cms, cseq = string.match(cur, '^(%d+)%-(%d+)$') end
    local later = cms == nil
    if not later then
      if #ms ~= #cms then later = #ms > #cms
      elseif ms ~= cms then later = ms > cms
      elseif #seq ~= #cseq then later = #seq > #cseq
      else later = seq > cseq end
    end
    if later then redis.call('HSET', sources, s, id) end
  end
else
  local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
  if tonumber(batch) > last then redis.call('SET', KEYS[1], batch) end
end
redis.call('DEL', plan, started)
return {1, batch, published or '0'}
"""
