"""Two-phase commit on one Redis: staging lists, a publishing plan, and the Lua script
that publishes a batch in bounded steps, keyed by batch id or by the source record.

- :mod:`.state_keys`: where a writer keeps its state (marker, marks, staging, plan).
- :mod:`.script`: the step and abort scripts, and the rules they keep.
- :mod:`.publish`: the driver's commit and abort around them.
- :mod:`.errors`: what a commit reports, and what stops it.
- :mod:`.layout`: the source streams a keyed sink has marks for, and a change of them.

Needs a standalone Redis: a script may only touch keys of one node, so the sink refuses
a Redis Cluster in transactional mode when the query starts.
"""

from __future__ import annotations

from ...sink_spi import SourceFields as SourceFields
from .errors import (
    CommitTooLarge as CommitTooLarge,
    PlanExpired as PlanExpired,
    PublishConflict as PublishConflict,
    Published as Published,
    SourceIdMissing as SourceIdMissing,
    StagingMismatch as StagingMismatch,
)
from .publish import (
    PAGE as PAGE,
    abort as abort,
    close_plan as close_plan,
    commit as commit,
    committed_batch as committed_batch,
    published_marks as published_marks,
)
from .script import (
    ABORT_SCRIPT as ABORT_SCRIPT,
    CLOSE_SCRIPT as CLOSE_SCRIPT,
    STEP_SCRIPT as STEP_SCRIPT,
)
from .state_keys import (
    ONE_SOURCE as ONE_SOURCE,
    PREFIX as PREFIX,
    index_key as index_key,
    marker_key as marker_key,
    plan_key as plan_key,
    sources_key as sources_key,
    staging_key as staging_key,
    staging_prefix as staging_prefix,
    started_key as started_key,
)

__all__ = (
    "ABORT_SCRIPT",
    "CLOSE_SCRIPT",
    "ONE_SOURCE",
    "PAGE",
    "PREFIX",
    "STEP_SCRIPT",
    "CommitTooLarge",
    "PlanExpired",
    "PublishConflict",
    "Published",
    "SourceFields",
    "SourceIdMissing",
    "StagingMismatch",
    "abort",
    "close_plan",
    "commit",
    "committed_batch",
    "index_key",
    "marker_key",
    "plan_key",
    "published_marks",
    "sources_key",
    "staging_key",
    "staging_prefix",
    "started_key",
)
