"""Two-phase commit on one Redis: staging lists, a publishing plan, and the Lua script
that publishes a batch in bounded steps.

Key layout of a writer (``identity`` from :class:`~enrich.spark.sink.rows.SinkSettings`)::

    enrich:sink:<identity>:committed                    last committed batch id (string)
    enrich:sink:<identity>:staging                      set of this writer's staging lists
    enrich:sink:<identity>:staging:<batch>:<part>:<attempt>   one task attempt's operations
    enrich:sink:<identity>:publishing                   the plan of the batch being published
    enrich:sink:<identity>:publishing:<token>           the same, for one batch write

Readers of the target never see staging lists: they hold encoded operations under this
private prefix, not entries or keys of the target.

:data:`STEP_SCRIPT` publishes a batch in steps, each one Redis script (so each atomic),
each applying at most ``step`` operations. The first step fixes the **plan**: it checks
that each staging list holds the number of operations its task reported (``LLEN``
against the count the commit passes in; a list short or gone makes it publish nothing,
record nothing and delete nothing: :class:`StagingMismatch`), then records the plan in
the publishing hash (the batch, its staging lists and their counts, a cursor: list and
position). Every step applies the operations after the cursor and advances the cursor
in the same script, so an operation is applied once whatever dies between two steps.
The last step sets the committed marker, deletes the plan and the batch's staging, and
deletes what crashed attempts of this or earlier batches left. A batch id at or below the
marker is skipped (its staging only deleted).

**Resume rule**: a step that finds a plan of its own batch follows that plan from its
cursor, whatever staging lists it was given: Spark replays a batch whose commit died with
new task attempts, which stage the same rows (the source replays the same offsets) in new
lists; those are deleted with the batch's other leftovers by the last step. Before every
step the lists still ahead of the cursor are checked again (``LLEN``): a list that
changed (expired by ``stagingTtl``, deleted) stops the publish with
:class:`StagingMismatch`, which then names the rows already published.

With ``step`` 0 the first step is the last: the whole batch and the marker in one script
(``atomicCommit``), its pause growing with the batch.

Needs a standalone Redis: a script may only touch keys of one node, so the sink refuses
a Redis Cluster in transactional mode when the query starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from enrich import EnrichError

PREFIX = "enrich:sink"
PAGE = 1000  # staged operations read per LRANGE inside the script


def marker_key(identity: str) -> str:
    return f"{PREFIX}:{identity}:committed"


def index_key(identity: str) -> str:
    return f"{PREFIX}:{identity}:staging"


def staging_prefix(identity: str) -> str:
    return f"{PREFIX}:{identity}:staging:"


def plan_key(identity: str, token: str | None = None) -> str:
    """The publishing plan of a streaming writer (one batch at a time), or of the batch
    write ``token`` (batch writes to one target may run side by side)."""
    base = f"{PREFIX}:{identity}:publishing"
    return base if token is None else f"{base}:{token}"


def staging_key(identity: str, batch: str, partition: int, attempt: str) -> str:
    """The staging list of one task attempt; ``batch`` is a batch id or a write token.

    ``attempt`` must be unique across restarts of the query, not only within one Spark
    application: a restarted application numbers its task attempts from zero again, and
    a replayed batch must never append to a list a killed attempt left behind (its rows
    would be published twice).
    """
    return f"{staging_prefix(identity)}{batch}:{partition}:{attempt}"


class StagingMismatch(EnrichError, RuntimeError):
    """A batch's staging does not hold what its tasks staged: the publish stopped.

    Attributes:
        batch: the batch id (or a batch write's token).
        staging: the staging list that differs.
        expected: the operations its task reported.
        found: the operations the list holds (0: the list is gone).
        published: the batch's operations published before the check failed (0 when
            the plan was not fixed yet: then nothing was published or recorded).
    """

    retryable = False

    def __init__(
        self, batch: str, staging: str, expected: int, found: int, published: int = 0
    ) -> None:
        if published:
            what = f"batch {batch} stopped after {published:,} of its operations were published"
            after = (
                " The rest of the batch cannot be published: its staging changed. The "
                "publishing plan is kept (its key ends in ':publishing'); delete it to let "
                "a replay publish the batch again from its offsets (the rows already "
                "published would be published again)."
            )
        else:
            what = f"batch {batch} not committed, nothing published"
            after = " Restart the query: the batch is replayed from its source offsets."
        super().__init__(
            f"redis sink: {what}: staging list {staging!r} holds {found} operations, its "
            f"task staged {expected} (was Redis restarted without persistence, or the "
            f"list deleted or expired, between the write and the commit?).{after}"
        )
        self.batch, self.staging, self.expected, self.found = batch, staging, expected, found
        self.published = published


class CommitTooLarge(EnrichError, ValueError):
    """An atomic transactional batch (``atomicCommit``) holds more rows than its
    ``maxRowsPerCommit``: nothing was published, the batch's staging is deleted.

    An atomic commit is one script, and Redis serves nobody else while it runs: the
    limit, when set, keeps that pause short for every client of the server.

    Attributes:
        batch: the batch id (or a batch write's token).
        rows: the rows (operations) the batch holds, or held when a task stopped staging.
        limit: the ``maxRowsPerCommit`` in force.
    """

    retryable = False

    def __init__(self, batch: str, rows: int, limit: int, *, streaming: bool) -> None:
        what = f"batch {batch}" if streaming else "this batch write"
        super().__init__(
            f"redis sink: {what} holds {rows:,} rows or more, above maxRowsPerCommit "
            f"({limit:,}) with atomicCommit=true; nothing was published. An atomic commit "
            f"publishes the whole batch in one Lua script, and Redis serves no other "
            f"client while it runs (4-8 us a row: {rows * 4 / 1000:,.0f} ms or more "
            "here). Drop atomicCommit (the default publishes any batch in steps of "
            "maxRowsPerCommit rows, readers seeing it step by step), bound the "
            "micro-batch at the source (redis-stream: maxEntriesPerTrigger; Kafka: "
            "maxOffsetsPerTrigger), or raise maxRowsPerCommit (0: no limit)."
        )
        self.batch, self.rows, self.limit = batch, rows, limit


class PublishConflict(EnrichError, RuntimeError):
    """The writer's publishing plan belongs to another batch than the one committing:
    two queries share a writer identity (target and checkpoint), or a plan outlived its
    query. Nothing was published.

    Attributes:
        batch: the batch committing.
        planned: the batch the plan publishes.
        plan: the plan's key.
    """

    retryable = False

    def __init__(self, batch: str, planned: str, plan: str) -> None:
        super().__init__(
            f"redis sink: batch {batch} not committed, nothing published: the writer is "
            f"still publishing batch {planned} ({plan!r}). Two queries with the same target "
            "and checkpointLocation write as one writer; if the query that published "
            f"batch {planned} is gone for good, delete {plan!r} and its staging lists."
        )
        self.batch, self.planned, self.plan = batch, planned, plan


@dataclass(frozen=True)
class Published:
    """What a commit did.

    Attributes:
        skipped: the batch id was committed already: nothing was published.
        rows: the operations this commit applied (a resumed commit: those after the
            cursor only).
        steps: the scripts it ran.
        resumed: it followed a plan an earlier commit of the batch had started.
        cleaned: leftover staging lists deleted (of crashed or replaced attempts).
        longest: the most operations one of its steps applied.
    """

    skipped: bool
    rows: int
    steps: int
    resumed: bool
    cleaned: int
    longest: int


# KEYS: marker, index, plan, staging lists of this attempt of the batch.
# ARGV: batch id (or token), marked ("1": check and set the marker), staging prefix,
# this batch's own staging prefix, page size, step (most operations this script applies;
# 0: no bound), ttl of the plan in seconds (0: none), then the number of operations each
# staging list must hold, in KEYS order.
# Returns {state, applied, n, found, published, cleaned}:
#   state 0: a step ran, applied operations, n = 1 when it was the last, found = 1 when
#            the plan was an earlier commit's, published = the batch's total so far;
#   state 1: the batch id is at or below the marker: skipped;
#   state -1: staging list n of the plan holds `found` operations, not its count:
#            nothing of this step applied (published: what earlier steps applied);
#   state -2: the plan is batch `published` (a string): another batch's.
# `cleaned`: leftover staging lists the last step (or a skip) deleted.
STEP_SCRIPT = """
local batch, marked = ARGV[1], ARGV[2] == '1'
local plan = KEYS[3]
local function clean(keep)
  local cleaned = 0
  local prefix_len = string.len(ARGV[3])
  local b = tonumber(batch)
  for _, member in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local own = string.sub(member, 1, string.len(ARGV[4])) == ARGV[4]
    local mb = tonumber(string.match(string.sub(member, prefix_len + 1), '^(%d+):'))
    if (own or (marked and b and mb and mb <= b)) and not keep[member] then
      redis.call('UNLINK', member)
      redis.call('SREM', KEYS[2], member)
      cleaned = cleaned + 1
    end
  end
  return cleaned
end
if marked then
  local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
  if tonumber(batch) <= last then
    local cleaned = clean({})
    return {1, 0, cleaned, 0, 0, cleaned}
  end
end
local lists, counts, li, pos, published
local resumed = 0
local planned = redis.call('HGET', plan, 'batch')
if planned then
  if planned ~= batch then return {-2, 0, 0, 0, planned, 0} end
  lists = cjson.decode(redis.call('HGET', plan, 'lists'))
  counts = cjson.decode(redis.call('HGET', plan, 'counts'))
  li = tonumber(redis.call('HGET', plan, 'list'))
  pos = tonumber(redis.call('HGET', plan, 'pos'))
  published = tonumber(redis.call('HGET', plan, 'published'))
  resumed = 1
else
  lists, counts = {}, {}
  for i = 4, #KEYS do
    lists[#lists + 1] = KEYS[i]
    counts[#counts + 1] = tonumber(ARGV[i + 4])
  end
  li, pos, published = 1, 0, 0
end
for i = li, #lists do
  local found = redis.call('LLEN', lists[i])
  if found ~= counts[i] then return {-1, 0, i, found, published, 0} end
end
local step = tonumber(ARGV[6])
if step <= 0 then step = math.huge end
local page = tonumber(ARGV[5])
local applied = 0
while li <= #lists and applied < step do
  local want = math.min(page, step - applied, counts[li] - pos)
  if want > 0 then
    for _, item in ipairs(redis.call('LRANGE', lists[li], pos, pos + want - 1)) do
      local op = cjson.decode(item)
      local kind, key = op[1], op[2]
      if kind == 'x' then
        redis.call('XADD', key, '*', unpack(op, 3))
      elseif kind == 'h' then
        redis.call('DEL', key)
        if #op > 2 then redis.call('HSET', key, unpack(op, 3)) end
      elseif kind == 's' then
        redis.call('SET', key, op[3])
      else
        return redis.error_reply('unknown staged operation ' .. tostring(kind))
      end
    end
    pos = pos + want
    applied = applied + want
  end
  if pos >= counts[li] then li, pos = li + 1, 0 end
end
published = published + applied
if li <= #lists then
  if resumed == 0 then
    redis.call('HSET', plan, 'batch', batch, 'lists', cjson.encode(lists),
               'counts', cjson.encode(counts))
    local ttl = tonumber(ARGV[7])
    if ttl > 0 then redis.call('EXPIRE', plan, ttl) end
  end
  redis.call('HSET', plan, 'list', li, 'pos', pos, 'published', published)
  return {0, applied, 0, resumed, published, 0}
end
if marked then redis.call('SET', KEYS[1], batch) end
for i = 1, #lists do
  redis.call('UNLINK', lists[i])
  redis.call('SREM', KEYS[2], lists[i])
end
redis.call('DEL', plan)
return {0, applied, 1, resumed, published, clean({})}
"""

# KEYS: index, plan, staging lists named in the messages. ARGV: this batch's staging
# prefix, batch id (or token), "1" to discard a started plan of this batch too (batch
# writes: nothing resumes them). Deletes this batch's staging except, unless discarded,
# the lists of a plan that started publishing it (its replay resumes them).
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


def commit(
    client: Any,
    identity: str,
    batch: str,
    staged: Sequence[tuple[str, int]],
    *,
    marked: bool,
    step: int | None,
    plan_ttl: int = 0,
    between_steps: Callable[[Published], None] | None = None,
) -> Published:
    """Publish the staged lists of ``batch`` in steps of at most ``step`` operations.

    Args:
        client: a synchronous redis client.
        identity: the writer's identity.
        batch: the batch id (streaming) or the write's token (batch writes).
        staged: the staging lists of the batch's successful task attempts, each with the
            number of operations its task staged (ignored when a plan of ``batch`` was
            started already: it is resumed).
        marked: whether to check and advance the committed-batch marker (streaming).
            Unmarked (batch writes), the plan is the token's own.
        step: the most operations one script applies; None: the whole batch in one.
        plan_ttl: seconds before a plan left behind expires (0: never).
        between_steps: called after each step that was not the last (a test hook).

    Returns:
        What was published (:class:`Published`).

    Raises:
        StagingMismatch: a staging list does not hold what its task staged; the step
            published nothing and the marker did not move.
        PublishConflict: the writer is publishing another batch.
    """
    script = client.register_script(STEP_SCRIPT)  # EVALSHA: loaded once per server
    plan = plan_key(identity, None if marked else batch)
    lists = [name for name, _ in staged]
    keys = [marker_key(identity), index_key(identity), plan, *lists]
    args = [
        batch,
        "1" if marked else "0",
        staging_prefix(identity),
        f"{staging_prefix(identity)}{batch}:",
        PAGE,
        step or 0,
        plan_ttl,
        *(rows for _, rows in staged),
    ]
    rows = steps = longest = 0
    resumed = False
    while True:
        state, applied, n, found, published, cleaned = script(keys=keys, args=args)
        state, applied, n = int(state), int(applied), int(n)
        if state == 1:
            return Published(True, 0, steps + 1, resumed, int(cleaned), longest)
        if state == -2:
            planned = published.decode() if isinstance(published, bytes) else str(published)
            raise PublishConflict(batch, planned, plan)
        if state < 0:
            if steps == 0 and not int(published):  # the plan was not fixed: use the message
                name, expected = staged[n - 1]
            else:
                name, expected = _planned(client, plan, n)
            raise StagingMismatch(batch, name, expected, int(found), int(published))
        steps += 1
        rows += applied
        longest = max(longest, applied)
        resumed = resumed or bool(int(found))
        if n == 1:
            return Published(False, rows, steps, resumed, int(cleaned), longest)
        if between_steps is not None:
            between_steps(Published(False, rows, steps, resumed, 0, longest))


def _planned(client: Any, plan: str, n: int) -> tuple[str, int]:
    """The name and count of list ``n`` (from 1) of a recorded plan."""
    lists, counts = client.hmget(plan, "lists", "counts")
    return json.loads(lists)[n - 1], int(json.loads(counts)[n - 1])


def abort(
    client: Any, identity: str, batch: str, staged: list[str], *, marked: bool
) -> tuple[int, bool, int]:
    """Delete the staging of ``batch``; never touches anything already published.

    Streaming (``marked``): the lists of a plan that started publishing ``batch`` are
    kept, so the batch's replay resumes it (a reader has seen its first steps). A batch
    write's started plan is discarded with its staging: nothing would resume it.

    Returns:
        ``(staging lists deleted, whether a started plan was kept, its published rows)``.
    """
    deleted, kept, published = client.eval(
        ABORT_SCRIPT,
        2 + len(staged),
        index_key(identity),
        plan_key(identity, None if marked else batch),
        *staged,
        f"{staging_prefix(identity)}{batch}:",
        batch,
        "0" if marked else "1",
    )
    return int(deleted), bool(int(kept)), int(published)


def committed_batch(client: Any, identity: str) -> int | None:
    """The last batch id committed by ``identity``, or None."""
    value = client.get(marker_key(identity))
    return None if value is None else int(value)
