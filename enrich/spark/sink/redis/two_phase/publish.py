"""The driver's half of the two-phase commit: publish a batch's staging step by step,
or abort it (the scripts and their rules: :mod:`.script`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ...sink_spi import SourceFields
from .errors import PlanExpired, PublishConflict, Published, SourceIdMissing, StagingMismatch
from .script import ABORT_SCRIPT, CLOSE_SCRIPT, STEP_SCRIPT
from .state_keys import index_key, marker_key, plan_key, sources_key, staging_prefix, started_key

PAGE = 1000  # staged operations read per LRANGE inside the script


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
    source: SourceFields | None = None,
    ranges: Sequence[str] = (),
) -> Published:
    """Publish the staged lists of ``batch`` in steps of at most ``step`` operations.

    Args:
        client: a synchronous redis client.
        identity: the writer's identity.
        batch: the batch id (streaming) or the write's token (batch writes).
        staged: the staging lists of the batch's successful task attempts, each with the
            number of operations its task staged (ignored when a plan of ``batch`` was
            started already and the writer is keyed by batch id: it is resumed).
        marked: whether to check and advance the committed-batch marker (streaming).
            Unmarked (batch writes), the plan is the token's own.
        step: the most operations one script processes; None: the whole batch in one.
        plan_ttl: seconds before a plan left behind expires, with the staging lists it
            still reads (each step sets both; 0: never). A streaming plan leaves a
            trace that does not expire, by which the next commit names it.
        between_steps: called after each step that was not the last (a test hook).
        source: keyed by the source record: where rows hold their source entry id
            (and stream); each source entry is published at most once, whatever batch
            carries it (see :mod:`.script`). None: keyed by batch id.
        ranges: keyed by the source record, per staged list (in ``staged`` order, or
            none at all): its one source stream and first entry id when its rows are of
            that stream in entry-id order, or "" (see
            :mod:`~enrich.spark.sink.redis.source_range`); a list whose first id is after
            its stream's mark is published without each row's check.

    Returns:
        What was published (:class:`Published`).

    Raises:
        StagingMismatch: a staging list does not hold what its task staged; the step
            published nothing and the marker did not move.
        PublishConflict: the writer is publishing another batch (keyed by batch id).
        PlanExpired: a streaming plan expired with its staging before it finished.
        SourceIdMissing: keyed by source, a staged row has no source entry id.
    """
    script = client.register_script(STEP_SCRIPT)  # EVALSHA: loaded once per server
    plan = plan_key(identity, None if marked else batch)
    lists = [name for name, _ in staged]
    keys = [
        marker_key(identity),
        index_key(identity),
        plan,
        sources_key(identity),
        started_key(identity),
        *lists,
    ]
    args = [
        batch,
        "1" if marked else "0",
        staging_prefix(identity),
        f"{staging_prefix(identity)}{batch}:",
        PAGE,
        step or 0,
        plan_ttl,
        source.id if source is not None else "",
        source.stream if source is not None else "",
        *(rows for _, rows in staged),
        *(ranges if source is not None else ()),
    ]
    if source is not None and ranges and len(ranges) != len(staged):
        raise ValueError(f"{len(ranges)} source ranges for {len(staged)} staging lists")
    rows = steps = longest = replayed = unchecked = 0
    resumed = False
    while True:
        reply = script(keys=keys, args=args)
        state, applied, n, found, published, cleaned, skipped, detail = reply[:8]
        state, applied, n = int(state), int(applied), int(n)
        if state == 1:
            return Published(True, 0, steps + 1, resumed, int(cleaned), longest, replayed)
        if state == -2:
            raise PublishConflict(batch, _text(published), plan)
        if state == -4:
            raise PlanExpired(batch, _text(detail), int(published))
        if state == -3:
            assert source is not None
            raise SourceIdMissing(batch, source.id, _operation(detail))
        if state < 0:
            if steps == 0 and not int(published):  # the plan was not fixed: use the message
                name, expected = staged[n - 1]
            else:
                name, expected = _planned(client, plan, n)
            raise StagingMismatch(batch, name, expected, int(found), int(published))
        steps += 1
        rows += applied
        unchecked += int(reply[8]) if len(reply) > 8 else 0
        replayed += int(skipped)
        longest = max(longest, applied + int(skipped))
        resumed = resumed or bool(int(found))
        if n == 1:
            return Published(
                False, rows, steps, resumed, int(cleaned), longest, replayed, unchecked
            )
        if between_steps is not None:
            between_steps(Published(False, rows, steps, resumed, 0, longest, replayed))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _operation(staged: Any) -> str:
    """A staged operation as text for a message: its items as a JSON array (a packed
    operation is binary: MessagePack strings, see :func:`~enrich.spark.sink.redis.codec.pack`)."""
    raw = staged if isinstance(staged, bytes) else str(staged).encode("utf-8")
    if raw.startswith(b"["):  # staged as JSON by an earlier version
        return _text(raw)
    from ..codec import unpack

    try:
        return json.dumps([item.decode("utf-8", "replace") for item in unpack(raw)])
    except ValueError:
        return _text(raw)


def _planned(client: Any, plan: str, n: int) -> tuple[str, int]:
    """The name and count of list ``n`` (from 1) of a recorded plan."""
    lists, counts = client.hmget(plan, "lists", "counts")
    return json.loads(lists)[n - 1], int(json.loads(counts)[n - 1])


def close_plan(client: Any, identity: str, *, keyed: bool) -> tuple[str, int] | None:
    """Close a streaming writer's plan that cannot finish (its staging expired or was
    lost) as if its batch were published whole: nothing of it is published again.

    Keyed by batch id the marker rises to the plan's batch, so its replay is skipped;
    keyed by the source record (``keyed``) each mark rises to the largest entry id the
    plan reached. What the plan had not published yet is not published at all.

    Returns:
        ``(the plan's batch, the operations it had published)``, or None when there was
        no plan to close.

    Raises:
        ValueError: the plan's staging is all there (its replay finishes it; closing it
            would lose rows for nothing).
    """
    keys = [
        marker_key(identity),
        index_key(identity),
        plan_key(identity),
        sources_key(identity),
        started_key(identity),
    ]
    state, batch, published = client.eval(CLOSE_SCRIPT, len(keys), *keys, "1" if keyed else "0")
    if int(state) == -1:
        raise ValueError(
            f"the publishing plan of batch {_text(batch)} has all its staging: it is not "
            "lost, and the batch's replay finishes it (nothing to close)"
        )
    return (_text(batch), int(published)) if int(state) == 1 else None


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


def published_marks(client: Any, identity: str) -> dict[str, str]:
    """A writer keyed by the source record: per source stream (``"*"`` for the one
    stream of a writer without ``sourceStreamColumn``), the last entry id published."""
    return {_text(k): _text(v) for k, v in client.hgetall(sources_key(identity)).items()}
