"""The ``redis`` data source: a Spark sink writing rows to Redis, idempotently or in
two phases.

Options:
    url: ``redis://[user[:password]@]host[:port][/db]`` (``rediss://`` for TLS); a Redis
        Cluster node's URL in mode ``idempotent`` (the cluster is found from the node).
    stream | key: the target. ``stream``: append each row as an entry. ``key``: a
        template over the row's columns (``"order:{order_id}"``) naming the key each row
        upserts; ``value`` is ``hash`` (default) or ``json``.
    mode: ``transactional`` (default) or ``idempotent``.
    dead_letter: a stream receiving the rows whose error column (``error_column``,
        default ``enrich_error``) is not null, in the same commit as the good rows.
    checkpointLocation: the query's checkpoint; with the target, it names the writer's
        commit marker (see :class:`~enrich.spark.sink.redis.row_writes.SinkSettings`). A
        transactional streaming query needs it.
    stagingTtl: seconds before an abandoned attempt's staging expires (default 7 days);
        a publishing plan and the staging it still reads share it, refreshed together by
        each step of the commit, so they expire together.
    closeLostPlan: ``false`` (default) or ``true``: when a plan's staging expired or was
        lost mid-publish (the commit fails with ``PlanExpired`` or ``StagingMismatch``
        naming this option), close that plan as if its batch were published whole, so
        nothing of it is published twice (the unpublished rest is dropped), and go on.
    maxRowsPerCommit: transactional mode: the most rows one commit script publishes.
        Stepwise (the default): a batch of any size is published in steps of at most this
        many rows (default :data:`~enrich.spark.sink.redis.row_writes.STEP_ROWS`, 1,000; ``0``:
        one step). With ``atomicCommit``: the largest batch accepted (default: no limit); a
        larger one fails with
        :class:`~enrich.spark.sink.redis.two_phase.CommitTooLarge` and publishes nothing.
    atomicCommit: ``false`` (default) or ``true``: publish each batch in one script,
        so readers see it whole or not at all, at the price of a pause of Redis that
        grows with the batch (3.5-8 us a row).
    sourceIdColumn, sourceStreamColumn, sourceStreams: exactly once keyed by the source
        record (:mod:`~enrich.spark.sink.redis.by_source`).
    publishFrom: with ``sourceIdColumn``, ``driver`` (default) or ``tasks``: each task
        publishes its own rows and the commit only raises the marks
        (:mod:`~enrich.spark.sink.redis.two_phase.from_tasks`).

Guarantees, for a streaming query (Spark replays a failed micro-batch with the same id
and the same source offsets):

- ``idempotent``: each task writes its rows directly (:mod:`~enrich.spark.sink.redis.direct`:
  commands built a column at a time, a ``MULTI`` per chunk of rows, so a hash's
  ``DEL``+``HSET`` is never seen half done). A replay rewrites the same keys with the
  replayed rows, so keyed upserts end exactly-once in effect; readers may see part of a
  batch while it is written. Stream appends (and dead letters) are at-least-once in
  this mode: a replayed batch appends again.
- ``transactional``: tasks stage their rows under keys readers ignore
  (:mod:`~enrich.spark.sink.redis.two_phase`); the driver's ``commit`` publishes the batch in
  steps of at most ``maxRowsPerCommit`` rows, each one Lua script that also advances
  the batch's durable cursor, and the last step records the batch id. A batch id
  already committed is skipped, and a replay of a batch whose publish was cut short
  resumes it from its cursor, so each row is published once. Readers see a batch
  appear step by step (a prefix of it, in staging order); with ``atomicCommit`` whole
  or not at all. ``abort`` deletes staging only, never that of a started publish. The
  commit publishes nothing and fails the batch when a staging list does not hold the
  rows its task reported (:class:`~enrich.spark.sink.redis.two_phase.StagingMismatch`). A
  Redis Cluster is refused when the query starts (a script touches keys of one node).
- a batch write (``df.write``) is published the same way under a token of its own (no
  marker, no replay): if its commit fails after a step, the steps done stay published
  (a prefix of the write, in staging order), Spark's ``abort`` deletes the rest and logs
  how many rows were published; ``atomicCommit`` makes such a write all or nothing.

Values are encoded by :mod:`~enrich.spark.sink.redis.codec`: ``RedisLookup`` with the same
schema reads them back unchanged.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from ... import redis_options
from ...stages.arrow_stage import ArrowFunction
from .. import hooks
from ..joined import JoinableSink, run_stage
from . import by_source, two_phase
from .codec import pack
from .row_writes import RowEncoder, SinkMode, SinkSettings
from .source_range import SourceRange
from .two_phase import layout

log = logging.getLogger("enrich.spark.sinks")

CHUNK = 500  # Row objects encoded per chunk (a caller of write() may pass those)
# Staged operations per round trip: one RPUSH of ~1 ms of Redis time at 100-byte rows.
STAGE_CHUNK = 5_000

CLUSTER_TRANSACTIONAL = (
    'the "redis" sink in mode "transactional" cannot write to a Redis Cluster ({url}): its '
    "commit publishes the batch with Lua scripts that also move its marker and cursor, and a "
    "script may only touch keys of one node, while the batch's keys are spread over the "
    'cluster\'s slots. Use .option("mode", "idempotent") (keyed upserts stay exactly-once '
    "in effect; stream appends become at-least-once), or a standalone Redis for this sink"
)


@dataclass
class StagedPart(WriterCommitMessage):
    """What a task attempt staged: its staging list and how many rows it holds (or,
    publishing from the tasks, the rows it published and the spans it wrote); keyed by
    the source record, what the list holds of its source when the commit may skip each
    row's check (:meth:`~enrich.spark.sink.redis.source_range.SourceRange.summary`)."""

    staging: str | None
    rows: int
    spans: tuple[str, ...] = ()
    source_range: str = ""


def _task() -> tuple[int, str, str | None]:
    """This task's partition, a name for its attempt that no other attempt of any run of
    the query shares (Spark's attempt id plus a random part), and its batch id."""
    import uuid

    from pyspark import TaskContext

    nonce = uuid.uuid4().hex[:16]
    context = TaskContext.get()
    if context is None:  # pragma: no cover - write() always runs in a task
        return 0, nonce, None
    batch = context.getLocalProperty("streaming.sql.batchId")
    return context.partitionId(), f"{context.taskAttemptId()}-{nonce}", batch


def _rows(items: Iterator[Any]) -> Iterator[Sequence[Any]]:
    """Rows from what Spark hands ``write()``: Arrow record batches (the writers below
    are Arrow writers: a batch keeps timestamps as instants, where a ``Row`` has a naive
    local time), or ``Row`` objects (a caller of ``write()`` may pass those)."""
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield from zip(*(column.to_pylist() for column in item.columns), strict=True)
        else:
            yield item


class _RedisWriter:
    """The executor half, shared by batch and streaming writes."""

    def __init__(
        self,
        settings: SinkSettings,
        schema: StructType,
        token: str | None,
        cluster: bool = False,
        stage: ArrowFunction | None = None,
        run: str | None = None,
    ) -> None:
        self.settings = settings
        self.schema = schema  # what is written: the stage's output under ``stage``
        RowEncoder(settings, schema)  # a bad key template fails on the driver
        self.token = token  # batch writes: stands for the batch id
        self.cluster = cluster  # idempotent writes to a Redis Cluster (see _apply)
        self.stage = stage  # a query's Python stage, run here (enrich.spark.sink.joined)
        self.run = run  # publishFrom=tasks: this run of the query (from_tasks' spans)

    def _write(self, items: Iterator[Any]) -> StagedPart:
        items = run_stage(self.stage, items)
        if self.settings.source is not None:  # every row's source entry, checked first
            items = by_source.checked(items, self.settings.source, self.schema)
        partition, attempt, batch_id = _task()
        batch = batch_id if batch_id is not None else self.token
        hooks.pause_if_asked("before_write", batch_id)
        encoder = RowEncoder(self.settings, self.schema)
        if self.cluster:
            cluster = redis_options.connect_cluster(self.settings.url)
            try:
                return StagedPart(None, self._apply(cluster, encoder, items, batch_id, True))
            finally:
                cluster.close()
        client = redis_options.connect(self.settings.url)
        try:
            if self.settings.mode is SinkMode.IDEMPOTENT:
                return StagedPart(None, self._apply(client, encoder, items, batch_id, False))
            assert batch is not None
            identity = self.settings.identity
            if self.settings.from_tasks:
                return self._publish(client, encoder, items, (batch, partition, attempt))
            staging = two_phase.staging_key(identity, batch, partition, attempt)
            ranges = None
            if self.settings.source is not None:
                ranges = SourceRange(self.settings.source, self.schema.names)
                items = ranges.follow(items)
            count = 0
            limit = self.settings.max_rows if self.settings.atomic else None
            for chunk in _staged_chunks(encoder, items):
                if limit is not None and count + len(chunk) > limit:
                    # An atomic batch of this task alone is over the limit: stop staging
                    # now (the commit would refuse it) and leave the list to the abort.
                    raise two_phase.CommitTooLarge(
                        batch, count + len(chunk), limit, streaming=batch_id is not None
                    )
                pipe = client.pipeline(transaction=False)
                if not count:
                    # Indexed first (Redis runs a pipeline in order), so a crash in the
                    # middle leaves a list the next commit finds.
                    pipe.sadd(two_phase.index_key(identity), staging)
                pipe.rpush(staging, *chunk)
                pipe.expire(staging, self.settings.staging_ttl)
                pipe.execute()
                count += len(chunk)
                hooks.pause_if_asked("mid_write", batch_id)
            summary = ranges.summary() if ranges is not None and count else ""
            return StagedPart(staging if count else None, count, source_range=summary)
        finally:
            client.close()

    def _publish(
        self, client: Any, encoder: RowEncoder, items: Iterator[Any], task: tuple[str, int, str]
    ) -> StagedPart:
        """``publishFrom=tasks``: this task's rows published keyed by their source
        records (:mod:`~enrich.spark.sink.redis.two_phase.from_tasks`); nothing staged."""
        from .two_phase import from_tasks

        assert self.run is not None and self.settings.source is not None
        batch, partition, attempt = task
        done = from_tasks.publish(
            client,
            self.settings.identity,
            self.settings.source,
            (self.run, batch, partition, attempt),
            _staged_chunks(encoder, items),
            step=self.settings.max_rows or STAGE_CHUNK,
            after_chunk=lambda _: hooks.pause_if_asked("mid_write", batch),
        )
        return StagedPart(None, done.rows, done.spans)

    @staticmethod
    def _apply(
        client: Any, encoder: RowEncoder, items: Iterator[Any], batch_id: Any, cluster: bool
    ) -> int:
        """Write the rows directly (:mod:`~enrich.spark.sink.redis.direct`): a column at a time
        and a ``MULTI`` per chunk on a standalone Redis; on a cluster (no ``MULTI``
        across slots) a pipeline per node, each hash replaced by one script call on its
        key, so a reader never sees a hash half replaced."""
        from . import direct

        if cluster:
            return direct.write_cluster(client, encoder, _rows(items), batch_id)
        return direct.write(client, encoder, items, batch_id)

    def _commit(self, messages: list[Any], batch: str, marked: bool) -> None:
        if self.settings.mode is SinkMode.IDEMPOTENT:
            return
        if self.settings.from_tasks:
            self._settle(batch, [s for m in messages if isinstance(m, StagedPart) for s in m.spans])
            return
        parts = [m for m in messages if isinstance(m, StagedPart) and m.staging]
        staged = [(m.staging, m.rows) for m in parts if m.staging]
        settings = self.settings
        rows, limit = sum(n for _, n in staged), settings.max_rows
        if settings.atomic and limit is not None and rows > limit:
            self._abort(messages, batch, marked)
            raise two_phase.CommitTooLarge(batch, rows, limit, streaming=marked)
        client = redis_options.connect(settings.url)

        def publish() -> two_phase.Published:
            return two_phase.commit(
                client,
                settings.identity,
                batch,
                staged,
                marked=marked,
                step=None if settings.atomic else limit,
                plan_ttl=settings.staging_ttl,
                between_steps=lambda _: hooks.pause_if_asked(
                    "between_steps", batch if marked else None
                ),
                source=settings.source,
                ranges=[m.source_range for m in parts],
            )

        try:
            try:
                done = publish()
            except (two_phase.PlanExpired, two_phase.StagingMismatch) as exc:
                lost = isinstance(exc, two_phase.PlanExpired) or exc.published > 0
                if not (marked and lost and settings.close_lost_plan):
                    raise
                self._close_lost_plan(client)
                done = publish()
        finally:
            client.close()
        log.info(
            "redis sink %s: batch %s %s (%d operations in %d steps, at most %d a step%s; "
            "%d leftover staging lists removed%s%s)",
            settings.target,
            batch,
            "was already committed, skipped" if done.skipped else "committed",
            done.rows,
            done.steps,
            done.longest,
            ", resuming a publish an earlier attempt started" if done.resumed else "",
            done.cleaned,
            f"; {done.replayed} rows of source entries published before" if done.replayed else "",
            f"; {done.unchecked} published without a row-by-row source check"
            if done.unchecked
            else "",
        )

    def _settle(self, batch: str, spans: list[str]) -> None:
        """``publishFrom=tasks``: the tasks published the batch; raise the marks past
        the spans they wrote."""
        from .two_phase import from_tasks

        client = redis_options.connect(self.settings.url)
        try:
            raised, deleted, left = from_tasks.settle(client, self.settings.identity, spans)
        finally:
            client.close()
        log.info(
            "redis sink %s: batch %s settled (published by its tasks; %d marks raised, "
            "%d spans settled, %d left by earlier runs above the marks)",
            self.settings.target,
            batch,
            raised,
            deleted,
            left,
        )

    def _close_lost_plan(self, client: Any) -> None:
        """``closeLostPlan``: close the plan whose staging is gone (see
        :func:`~enrich.spark.sink.redis.two_phase.close_plan`), saying what it drops."""
        settings = self.settings
        closed = two_phase.close_plan(client, settings.identity, keyed=settings.source is not None)
        if closed is not None:
            log.warning(
                "redis sink %s: closeLostPlan: the publishing plan of batch %s, whose "
                "staging expired or was lost after %d of its operations were published, "
                "is closed as if published whole: nothing of it is published again, and "
                "its unpublished rest is dropped",
                settings.target,
                *closed,
            )

    def _abort(self, messages: list[Any], batch: str, marked: bool) -> None:
        if self.settings.mode is SinkMode.IDEMPOTENT or self.settings.from_tasks:
            return  # from the tasks: what they published stays, the spans mark it
        staged = [m.staging for m in messages if isinstance(m, StagedPart) and m.staging]
        client = redis_options.connect(self.settings.url)
        try:
            _, kept, published = two_phase.abort(
                client, self.settings.identity, batch, staged, marked=marked
            )
        finally:
            client.close()
        if kept:
            log.warning(
                "redis sink %s: batch %s aborted after %d of its rows were published: its "
                "publishing plan is kept, and the batch's replay publishes the rest",
                self.settings.target,
                batch,
                published,
            )
        elif published:
            log.warning(
                "redis sink %s: batch write aborted after %d of its rows were published "
                "(the first steps of its commit); the rest of its staging is deleted",
                self.settings.target,
                published,
            )


def _staged_chunks(encoder: RowEncoder, items: Iterator[Any]) -> Iterator[list[bytes]]:
    """Packed operations in chunks of at most ``STAGE_CHUNK``, gathered across Arrow
    batches (Spark cuts a partition into batches of
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows; each chunk costs a round
    trip): an Arrow batch's built a column at a time (:mod:`~enrich.spark.sink.redis.columns`)
    where it can, the rest row by row."""
    from . import columns  # here: Arrow compute, which the planner processes never need

    columnar = columns.is_columnar(encoder)
    rows: list[Any] = []
    pending: list[bytes] = []
    for item in items:
        if not isinstance(item, pa.RecordBatch):
            rows.append(item)
            continue
        ops = columns.staged_operations(encoder, item) if columnar else None
        if ops is None:
            ops = [pack(encoder.encode(row)) for row in _rows(iter([item]))]
        pending += ops
        while len(pending) >= STAGE_CHUNK:
            yield pending[:STAGE_CHUNK]
            pending = pending[STAGE_CHUNK:]
    if pending:
        yield pending
    for chunk in _chunks(encoder, iter(rows)):
        yield [pack(op) for op in chunk]


def _chunks(encoder: RowEncoder, rows: Iterator[Any]) -> Iterator[list[list[str | bytes]]]:
    chunk: list[list[str | bytes]] = []
    for row in rows:
        chunk.append(encoder.encode(row))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class RedisStreamWriter(_RedisWriter, DataSourceStreamArrowWriter):
    """Streaming writes: one transaction per micro-batch (see the module docstring)."""

    def write(self, iterator: Iterator[Any]) -> StagedPart:
        return self._write(iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        hooks.pause_if_asked("before_commit", batchId)
        self._commit(messages, str(batchId), marked=True)
        hooks.pause_if_asked("after_commit", batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        self._abort(messages, str(batchId), marked=True)


class RedisBatchWriter(_RedisWriter, DataSourceArrowWriter):
    """``df.write.format("redis")``: the whole write is one batch (no marker, no replay)."""

    def write(self, iterator: Iterator[Any]) -> StagedPart:
        return self._write(iterator)

    def commit(self, messages: list[Any]) -> None:
        assert self.token is not None
        self._commit(messages, self.token, marked=False)

    def abort(self, messages: list[Any]) -> None:
        assert self.token is not None
        self._abort(messages, self.token, marked=False)


class RedisSinkDataSource(JoinableSink):
    """``writeStream.format("redis")`` and ``write.format("redis")``."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.settings = SinkSettings.of(options)

    @classmethod
    def name(cls) -> str:
        return "redis"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        schema = self.joined_schema(schema)
        by_source.check_writer(self.settings.source, schema, streaming=False)
        cluster = self._cluster()
        token = f"w{uuid.uuid4().hex}"
        return RedisBatchWriter(self.settings, schema, token, cluster, self.joined_function())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if self.settings.mode is SinkMode.TRANSACTIONAL and not self.settings.checkpoint:
            raise ValueError(
                'the "redis" sink in mode "transactional" needs .option("checkpointLocation", '
                "path): with the target it names the query's commit marker"
            )
        schema = self.joined_schema(schema)
        by_source.check_writer(self.settings.source, schema, streaming=True)
        cluster = self._cluster()
        run = None
        if self.settings.source is not None:  # keyed by the source record
            self._check_layout()
            run = by_source.start_run(self.settings)
        return RedisStreamWriter(self.settings, schema, None, cluster, self.joined_function(), run)

    def _check_layout(self) -> None:
        """Keyed by the source record: the marks follow a change of the query's source
        streams, or the query is refused before it publishes (:mod:`.layout`)."""
        settings = self.settings
        assert settings.source is not None
        client = redis_options.connect(settings.url)
        try:
            carried = layout.check_layout(
                client,
                settings.identity,
                by_stream=bool(settings.source.stream),
                streams=settings.streams,
            )
        finally:
            client.close()
        for to, origin in carried.items():
            log.warning(
                "redis sink %s: the query's source streams changed under its checkpoint: "
                "the mark of %r carries over to %r",
                settings.target,
                origin,
                to,
            )

    def _cluster(self) -> bool:
        """Whether the target is a Redis Cluster (asked once, on the driver, before any
        task): refused in mode transactional, with the reason and the alternative."""
        cluster = redis_options.is_cluster(self.settings.url)
        if cluster and self.settings.mode is SinkMode.TRANSACTIONAL:
            raise ValueError(
                CLUSTER_TRANSACTIONAL.format(url=redis_options.masked(self.settings.url))
            )
        return cluster
