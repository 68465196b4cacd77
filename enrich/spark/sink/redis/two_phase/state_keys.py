"""Where a writer keeps its two-phase state in Redis: one prefix per writer identity.

Key layout of a writer (``identity`` from
:class:`~enrich.spark.sink.redis.row_writes.SinkSettings`)::

    enrich:sink:<identity>:committed                    last committed batch id (string)
    enrich:sink:<identity>:sources                      keyed by source record: per source
                                                        stream, the last entry id published
    enrich:sink:<identity>:staging                      set of this writer's staging lists
    enrich:sink:<identity>:staging:<batch>:<part>:<attempt>   one task attempt's operations
    enrich:sink:<identity>:publishing                   the plan of the batch being published
    enrich:sink:<identity>:publishing:<token>           the same, for one batch write
    enrich:sink:<identity>:started                      a streaming plan's lasting trace:
                                                        its batch and what it published
    enrich:sink:<identity>:pending                      publishing from the tasks: the
                                                        spans of entry ids tasks published
                                                        that no commit settled yet

Readers of the target never see staging lists: they hold encoded operations under this
private prefix, not entries or keys of the target.
"""

from __future__ import annotations

PREFIX = "enrich:sink"
ONE_SOURCE = "*"  # the field of the one source stream when rows name none


def marker_key(identity: str) -> str:
    return f"{PREFIX}:{identity}:committed"


def sources_key(identity: str) -> str:
    """The hash of the last source entry id published per source stream."""
    return f"{PREFIX}:{identity}:sources"


def pending_key(identity: str) -> str:
    """Publishing from the tasks (:mod:`.from_tasks`): the hash of the spans tasks
    published and no commit has settled yet."""
    return f"{PREFIX}:{identity}:pending"


def index_key(identity: str) -> str:
    return f"{PREFIX}:{identity}:staging"


def staging_prefix(identity: str) -> str:
    return f"{PREFIX}:{identity}:staging:"


def plan_key(identity: str, token: str | None = None) -> str:
    """The publishing plan of a streaming writer (one batch at a time), or of the batch
    write ``token`` (batch writes to one target may run side by side)."""
    base = f"{PREFIX}:{identity}:publishing"
    return base if token is None else f"{base}:{token}"


def started_key(identity: str) -> str:
    """The trace a streaming writer's plan leaves while it publishes (no TTL, unlike the
    plan and its staging): the next commit names a plan that expired by it."""
    return f"{PREFIX}:{identity}:started"


def staging_key(identity: str, batch: str, partition: int, attempt: str) -> str:
    """The staging list of one task attempt; ``batch`` is a batch id or a write token.

    ``attempt`` must be unique across restarts of the query, not only within one Spark
    application: a restarted application numbers its task attempts from zero again, and
    a replayed batch must never append to a list a killed attempt left behind (its rows
    would be published twice).
    """
    return f"{staging_prefix(identity)}{batch}:{partition}:{attempt}"
