"""Two-phase commit on one Redis: staging lists, and the Lua script that publishes them.

Key layout of a writer (``identity`` from :class:`~enrich.spark.sink.rows.SinkSettings`)::

    enrich:sink:<identity>:committed                    last committed batch id (string)
    enrich:sink:<identity>:staging                      set of this writer's staging lists
    enrich:sink:<identity>:staging:<batch>:<part>:<attempt>   one task attempt's operations

Readers of the target never see staging lists: they hold encoded operations under this
private prefix, not entries or keys of the target. :data:`COMMIT_SCRIPT` runs as one
Redis script, so it is atomic: either every operation of the batch and the new marker
take effect, or none does. A batch id at or below the marker is skipped (its staging is
only deleted). Every run of the script also deletes the staging of earlier batches and
of other attempts of this batch: what crashed attempts left behind.

The script first checks that each staging list holds the number of operations its task
reported (``LLEN`` against the count the commit passes in): a list that is short or gone
(a Redis restarted without persistence between the write and the commit, a list deleted
or expired by ``stagingTtl``) makes it publish nothing, advance no marker and delete no
staging, and :func:`commit` raises :class:`StagingMismatch` naming the batch, the list,
and the counts expected and found.

Needs a standalone Redis: a script may only touch keys of one node, so the sink refuses
a Redis Cluster in transactional mode when the query starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from enrich import EnrichError

from ..redis_options import BATCH_ROWS

PREFIX = "enrich:sink"
PAGE = 1000  # staged operations read per LRANGE inside the script


def marker_key(identity: str) -> str:
    return f"{PREFIX}:{identity}:committed"


def index_key(identity: str) -> str:
    return f"{PREFIX}:{identity}:staging"


def staging_prefix(identity: str) -> str:
    return f"{PREFIX}:{identity}:staging:"


def staging_key(identity: str, batch: str, partition: int, attempt: str) -> str:
    """The staging list of one task attempt; ``batch`` is a batch id or a write token.

    ``attempt`` must be unique across restarts of the query, not only within one Spark
    application: a restarted application numbers its task attempts from zero again, and
    a replayed batch must never append to a list a killed attempt left behind (its rows
    would be published twice).
    """
    return f"{staging_prefix(identity)}{batch}:{partition}:{attempt}"


class StagingMismatch(EnrichError, RuntimeError):
    """A batch's staging does not hold what its tasks staged: nothing was published.

    Attributes:
        batch: the batch id (or a batch write's token).
        staging: the staging list that differs.
        expected: the operations its task reported.
        found: the operations the list holds (0: the list is gone).
    """

    retryable = False

    def __init__(self, batch: str, staging: str, expected: int, found: int) -> None:
        super().__init__(
            f"redis sink: batch {batch} not committed, nothing published: staging list "
            f"{staging!r} holds {found} operations, its task staged {expected} (was Redis "
            "restarted without persistence, or the list deleted or expired, between the "
            "write and the commit?). Restart the query: the batch is replayed from its "
            "source offsets."
        )
        self.batch, self.staging, self.expected, self.found = batch, staging, expected, found


class CommitTooLarge(EnrichError, ValueError):
    """A transactional batch holds more rows than one commit may publish
    (``maxRowsPerCommit``): nothing was published, the batch's staging is deleted.

    The commit is one script, and Redis serves nobody else while it runs: the limit keeps
    that pause short for every client of the server (the lookups included).

    Attributes:
        batch: the batch id (or a batch write's token).
        rows: the rows (operations) the batch holds, or held when a task stopped staging.
        limit: the ``maxRowsPerCommit`` in force.
    """

    retryable = False

    def __init__(self, batch: str, rows: int, limit: int, *, streaming: bool) -> None:
        what = f"batch {batch}" if streaming else "this batch write"
        bound = (
            "Bound the micro-batch at the source (redis-stream: maxEntriesPerTrigger, "
            f"{BATCH_ROWS:,} by default; Kafka: maxOffsetsPerTrigger; files: "
            "maxFilesPerTrigger)"
            if streaming
            else 'Write it with .option("mode", "idempotent") (keyed upserts stay exactly '
            "once in effect), or in smaller writes"
        )
        super().__init__(
            f"redis sink: {what} holds {rows:,} rows or more, above maxRowsPerCommit "
            f"({limit:,}); nothing was published. A transactional commit publishes the "
            f"whole batch in one Lua script, and Redis serves no other client while it "
            f"runs (about 4 us a row: {rows * 4 / 1000:,.0f} ms here). {bound}, or raise "
            "maxRowsPerCommit to accept longer pauses (0: no limit)."
        )
        self.batch, self.rows, self.limit = batch, rows, limit


# KEYS: marker, index, staging lists of the batch.
# ARGV: batch id ("" for a batch write: no marker), staging prefix, this batch's own
# staging prefix (other attempts of it are cleaned), page size, then the number of
# operations each staging list must hold, in KEYS order.
# Returns {skipped, applied, cleaned}, or {-1, n, found}: staging list n (from 1) holds
# `found` operations, not the expected count, and nothing was changed.
COMMIT_SCRIPT = """
local batch = tonumber(ARGV[1])
local skipped = 0
local applied = 0
if batch then
  local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
  if batch <= last then skipped = 1 end
end
local page = tonumber(ARGV[4])
if skipped == 0 then
  for i = 3, #KEYS do
    local found = redis.call('LLEN', KEYS[i])
    if found ~= tonumber(ARGV[i + 2]) then return {-1, i - 2, found} end
  end
  for i = 3, #KEYS do
    local n = redis.call('LLEN', KEYS[i])
    local pos = 0
    while pos < n do
      for _, item in ipairs(redis.call('LRANGE', KEYS[i], pos, pos + page - 1)) do
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
        applied = applied + 1
      end
      pos = pos + page
    end
  end
  if batch then redis.call('SET', KEYS[1], ARGV[1]) end
end
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('SREM', KEYS[2], KEYS[i])
end
local cleaned = 0
local prefix_len = string.len(ARGV[2])
for _, member in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local own = string.sub(member, 1, string.len(ARGV[3])) == ARGV[3]
  local b = tonumber(string.match(string.sub(member, prefix_len + 1), '^(%d+):'))
  if own or (batch and b and b <= batch) then
    redis.call('DEL', member)
    redis.call('SREM', KEYS[2], member)
    cleaned = cleaned + 1
  end
end
return {skipped, applied, cleaned}
"""

# KEYS: index, staging lists named in the messages. ARGV: this batch's staging prefix.
ABORT_SCRIPT = """
for i = 2, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('SREM', KEYS[1], KEYS[i])
end
for _, member in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if string.sub(member, 1, string.len(ARGV[1])) == ARGV[1] then
    redis.call('DEL', member)
    redis.call('SREM', KEYS[1], member)
  end
end
return 0
"""


def commit(
    client: Any,
    identity: str,
    batch: str,
    staged: Sequence[tuple[str, int]],
    *,
    marked: bool,
) -> tuple[bool, int, int]:
    """Publish the staged lists of ``batch`` atomically.

    Args:
        client: a synchronous redis client.
        identity: the writer's identity.
        batch: the batch id (streaming) or the write's token (batch writes).
        staged: the staging lists of the batch's successful task attempts, each with the
            number of operations its task staged.
        marked: whether to check and advance the committed-batch marker (streaming).

    Returns:
        ``(skipped, operations applied, leftover staging lists deleted)``; ``skipped``
        is true when ``batch`` was already committed.

    Raises:
        StagingMismatch: a staging list does not hold what its task staged; nothing was
            published and the marker did not move.
    """
    lists = [name for name, _ in staged]
    # EVALSHA (loading the script once per server): the script is not resent per batch.
    result = client.register_script(COMMIT_SCRIPT)(
        keys=[marker_key(identity), index_key(identity), *lists],
        args=[
            batch if marked else "",
            staging_prefix(identity),
            f"{staging_prefix(identity)}{batch}:",
            PAGE,
            *(rows for _, rows in staged),
        ],
    )
    first, second, third = (int(x) for x in result)
    if first < 0:
        name, expected = staged[second - 1]
        raise StagingMismatch(batch, name, expected, third)
    return bool(first), second, third


def abort(client: Any, identity: str, batch: str, staged: list[str]) -> None:
    """Delete the staging of ``batch``; never touches anything already published."""
    client.eval(
        ABORT_SCRIPT,
        1 + len(staged),
        index_key(identity),
        *staged,
        f"{staging_prefix(identity)}{batch}:",
    )


def committed_batch(client: Any, identity: str) -> int | None:
    """The last batch id committed by ``identity``, or None."""
    value = client.get(marker_key(identity))
    return None if value is None else int(value)
