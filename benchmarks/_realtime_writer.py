"""The real-time path's writer (:mod:`benchmarks.realtime`): a ``foreach`` writer that
runs the project's async lookup join on the rows Spark hands it, and writes each joined
row into a Redis stream exactly once, keyed by its Kafka topic, partition and offset.

How a row goes through (one task per Kafka partition under ``trigger(realTime=...)``):

- ``process(row)`` (Spark's task thread in the Python worker) hands the row to the
  process's runtime loop (:func:`enrich.engine.runtime.get_loop`) and returns; it waits
  only when ``PENDING`` rows are not written yet (back-pressure).
- On the loop, the rows waiting when the join asks for more form one chunk, so the rows
  of one pickled batch Spark delivered go out in one ``MGET``
  (:func:`enrich.lookup_chunks_async`, ordered: each partition's rows leave in offset
  order); the lookups of the next chunks are in flight while one is written.
- Each joined chunk is written by one script (:data:`WRITE_SCRIPT`): per source
  partition (``topic/partition``) it appends the rows whose offset is above the
  partition's mark and raises the mark, atomically. A replayed record (a task retried,
  a batch re-run from the checkpoint's offsets) is at or below its mark and is skipped:
  the micro-batch sinks' keying (:mod:`enrich.spark.sink.sink_spi`).
- ``close(error)`` waits until every row handed over is written (or fails the task with
  the loop's error).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from .lookup import KEYS

PENDING = 20_000  # rows handed over and not written yet, at most
CAPACITY = 4_000  # rows in the join's lookups at once, at most
CHUNK = CAPACITY // 4  # rows a lookup chunk and a write script hold (chunk_rows(CAPACITY))
FIELDS = ("order_id", "ts", "name", "tier")  # what each output entry holds

# KEYS: 1 the marks (hash: "topic/partition" -> the highest offset written), 2 the stream.
# ARGV: 1 the source partition, 2 the number F of fields, 3..2+F their names, then per
# row its offset and F values, in offset order (the rows a 1:N match gives one record
# share its offset, and one call). Returns the number of entries appended.
WRITE_SCRIPT = """
local part, f = ARGV[1], tonumber(ARGV[2])
local mark = tonumber(redis.call('HGET', KEYS[1], part) or '-1')
local top, written = mark, 0
local entry = {}
for j = 1, f do entry[2 * j - 1] = ARGV[2 + j] end
local i = 3 + f
while i <= #ARGV do
  local offset = tonumber(ARGV[i])
  if offset > mark then
    for j = 1, f do entry[2 * j] = ARGV[i + j] end
    redis.call('XADD', KEYS[2], '*', unpack(entry))
    if offset > top then top = offset end
    written = written + 1
  end
  i = i + 1 + f
end
if top > mark then redis.call('HSET', KEYS[1], part, top) end
return written
"""


class JoinWriter:
    """A ``foreach`` writer: rows of ``order_id``, ``ts``, ``user_id``, ``topic``,
    ``partition``, ``offset`` (other columns, a padding, are ignored) joined with the
    users in Redis (JSON ``name``, ``tier`` under ``user:<user_id>``) and appended to
    ``stream``, each source record once (marks in ``stream + ":marks"``). With
    ``join=False`` the rows are written as they come, no lookup (``name`` and ``tier``
    empty): Spark's hand-over alone."""

    def __init__(self, redis_url: str, stream: str, *, join: bool = True) -> None:
        self.redis_url = redis_url
        self.stream = stream
        self.join = join

    def open(self, partition_id: int, epoch_id: int) -> bool:
        from enrich.engine.runtime import get_loop

        self._loop = get_loop()
        self._room = threading.BoundedSemaphore(PENDING)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._done = asyncio.run_coroutine_threadsafe(self._pump(), self._loop)
        return True

    def process(self, row: Any) -> None:
        self._check()
        while not self._room.acquire(timeout=1.0):  # back-pressure, as long as the loop runs
            self._check()
        item = (row.order_id, row.ts, row.user_id, f"{row.topic}/{row.partition}", row.offset)
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _check(self) -> None:
        """Fails the task with the loop's error, once the loop has ended before close()."""
        if self._done.done():
            self._done.result()
            raise RuntimeError("the writer's loop ended before close()")

    def close(self, error: BaseException | None) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        if error is None:
            self._done.result()
        else:
            self._done.cancel()

    async def _chunks(self) -> AsyncIterator[tuple[list[Any], list[Any]]]:
        """The rows handed over, a chunk at a time: those waiting when asked, at most
        ``CHUNK``, at least one."""
        queue, ended = self._queue, False
        while not ended:
            first = await queue.get()
            if first is None:
                return
            rows = [first]
            while len(rows) < CHUNK and not queue.empty():
                item = queue.get_nowait()
                if item is None:
                    ended = True
                    break
                rows.append(item)
            yield rows, [r[2] for r in rows]

    async def _pump(self) -> None:
        import redis.asyncio as aioredis

        from connectors.redis import RedisLookup
        from enrich import JoinedChunk, lookup_chunks_async

        users = RedisLookup(
            self.redis_url, key_template="user:{}", value="json", schema="name string, tier string"
        )
        client = aioredis.Redis.from_url(self.redis_url)
        write = client.register_script(WRITE_SCRIPT)
        marks = f"{self.stream}:marks"
        try:
            if self.join:
                chunks = lookup_chunks_async(self._chunks(), users, capacity=CAPACITY)
            else:
                chunks = (JoinedChunk(t, list(range(len(t))), [None] * len(t), None)
                          async for t, _ in self._chunks())  # fmt: skip
            async for joined in chunks:
                parts: dict[str, list[Any]] = {}
                for i, found in zip(joined.indices, joined.rows, strict=True):
                    order, ts, _, part, offset = joined.tag[i]
                    name, tier = found if found is not None else ("", "")
                    parts.setdefault(part, []).extend((offset, order, ts, name or "", tier or ""))
                for part, args in parts.items():
                    await write(keys=[marks, self.stream], args=[part, len(FIELDS), *FIELDS, *args])
                for _ in joined.tag:
                    self._room.release()
        finally:
            await client.aclose()
            await users.aclose()


def user_id(order_column: str = "order_id") -> str:
    """The SQL of the users' key each order joins (the other Kafka paths' rule)."""
    return f"{order_column} * 7919 % {KEYS} AS user_id"
