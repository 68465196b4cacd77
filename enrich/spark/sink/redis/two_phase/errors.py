"""What a two-phase commit reports: its outcome, and the errors that stop it."""

from __future__ import annotations

from dataclasses import dataclass

from enrich import EnrichError

# What to do about a plan that cannot finish, said by both errors below.
WAY_OUT = (
    'To go on, restart the query once with .option("closeLostPlan", "true") (or call '
    "enrich.spark.sink.redis.two_phase.close_plan): the plan is closed as if its batch were "
    "published whole, so nothing of it is published twice, and the part that was not "
    "published is not published at all (its staging is gone). Do not delete the plan by "
    "hand: its batch would be published again from the start."
)


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
            after = f" The rest of the batch cannot be published: its staging changed. {WAY_OUT}"
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


class PlanExpired(EnrichError, RuntimeError):
    """A streaming writer's publishing plan and its staging lists expired (``stagingTtl``
    after the last step that touched them) before its batch finished publishing: the
    query was down longer than that. Nothing was published by this commit.

    Attributes:
        batch: the batch committing.
        planned: the batch the expired plan was publishing.
        published: the operations it had published.
    """

    retryable = False

    def __init__(self, batch: str, planned: str, published: int) -> None:
        super().__init__(
            f"redis sink: batch {batch} not committed, nothing published: the publish of "
            f"batch {planned} stopped after {published:,} of its operations, and its plan "
            "and staging lists expired (stagingTtl) before it was resumed. " + WAY_OUT
        )
        self.batch, self.planned, self.published = batch, planned, published


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
    query. Nothing was published. (A sink keyed by the source record finishes such a
    plan instead: its rows are published at most once whatever batch carries them.)

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


class SourceIdMissing(EnrichError, ValueError):
    """A staged row of a sink keyed by the source record carries no well-formed source
    entry id (the writer checks every row before staging, so only a row staged by
    another writer of the same identity gets here). The publish stopped before it: the
    rows before it are published, the cursor stands on it.

    Attributes:
        batch: the batch committing.
        column: the source id column (``sourceIdColumn``).
        operation: the staged operation, shortened.
    """

    retryable = False

    def __init__(self, batch: str, column: str, operation: str) -> None:
        super().__init__(
            f"redis sink: batch {batch} stopped: a staged row has no source entry id in "
            f"column {column!r} (sourceIdColumn), or not one of the form '<ms>-<seq>': "
            f"{operation[:200]}"
        )
        self.batch, self.column, self.operation = batch, column, operation


class SourceOrderBroken(EnrichError, ValueError):
    """A task publishing from the tasks (``publishFrom=tasks``) met rows it cannot
    publish there: a stream's rows out of entry-id order, or interleaved with another
    task's rows of the same stream. Nothing of the chunk was written.

    Attributes:
        batch: the batch.
        partition: the task's partition.
        stream: the source stream (``*``: the query's one stream).
    """

    retryable = False

    def __init__(self, batch: str, partition: int, stream: str, what: str) -> None:
        where = f"source stream {stream!r}" if stream != "*" else "the source stream"
        super().__init__(
            f"redis sink: cannot publish from the tasks: in partition {partition} of batch "
            f"{batch}, {where}: {what}. Nothing of this chunk was written. Publishing from "
            "the tasks needs each task's rows of a stream in entry-id order and each "
            "stream's range in one task; publish from the driver instead, which accepts any "
            'order: .option("publishFrom", "driver") (enrich.spark.low_latency(df, '
            'publish_from="driver"))'
        )
        self.batch, self.partition, self.stream = batch, partition, stream


@dataclass(frozen=True)
class Published:
    """What a commit did.

    Attributes:
        skipped: the batch id was committed already: nothing was published.
        rows: the operations this commit applied (a resumed commit: those after the
            cursor only).
        steps: the scripts it ran.
        resumed: it followed a plan an earlier commit had started.
        cleaned: leftover staging lists deleted (of crashed or replaced attempts).
        longest: the most operations one of its steps applied.
        replayed: keyed by the source record: operations not applied because their
            source entry was published already (a replay, or a batch re-cut).
        unchecked: keyed by the source record: operations applied without reading
            their source entry, their whole staging list being after its stream's mark
            (:mod:`~enrich.spark.sink.redis.source_range`).
    """

    skipped: bool
    rows: int
    steps: int
    resumed: bool
    cleaned: int
    longest: int
    replayed: int = 0
    unchecked: int = 0
