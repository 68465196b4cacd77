"""The stepwise transactional commit: a batch of any size is published in steps of at
most ``maxRowsPerCommit`` operations, each step one script that also advances the
batch's durable cursor; a replay resumes a publish cut short between steps; abort never
deletes a publish that started; ``atomicCommit`` publishes a batch in one script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
import redis
from pyspark.sql.types import LongType, StringType, StructField, StructType

from enrich.spark import redis_options
from enrich.spark.sink.redis import two_phase
from enrich.spark.sink.redis.codec import pack
from enrich.spark.sink.redis.data_source import RedisBatchWriter, RedisStreamWriter, StagedPart
from enrich.spark.sink.redis.row_writes import STEP_ROWS, SinkSettings
from enrich.spark.sink.redis.two_phase import (
    PublishConflict,
    Published,
    StagingMismatch,
    committed_batch,
    plan_key,
)
from tests.spark.sink.test_sink_commit import _Task
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.timeout(300)]

SCHEMA = StructType(
    [
        StructField("order_id", LongType()),
        StructField("name", StringType()),
        StructField("enrich_error", StringType()),
    ]
)
TARGETS = {
    "stream": {"stream": "out"},
    "hash": {"key": "order:{order_id}"},
    "json": {"key": "doc:{order_id}", "value": "json"},
    "dead letter": {"stream": "out", "dead_letter": "dlq"},
}


class Died(Exception):
    """The driver dying between two steps of a commit."""


def settings_of(server: Any, tmp_path: Path, **options: str) -> SinkSettings:
    base = {"url": server.url, "checkpointLocation": str(tmp_path / "ck")}
    return SinkSettings.of({**base, **options})


def batch_of(ids: range, failed: int = 0) -> pa.RecordBatch:
    """Rows ``ids``; with ``failed``, every ``failed``-th row carries an error."""
    errors = [f"e{i}" if failed and i % failed == 0 else None for i in ids]
    return pa.RecordBatch.from_pydict(
        {"order_id": list(ids), "name": [f"n{i}" for i in ids], "enrich_error": errors},
        schema=pa.schema(
            [("order_id", pa.int64()), ("name", pa.string()), ("enrich_error", pa.string())]
        ),
    )


def stage(
    settings: SinkSettings, monkeypatch: Any, batch: str, parts: list[range], failed: int = 0
) -> list[StagedPart]:
    """Each part's rows written by a task of its own of ``batch`` (the executor half);
    a batch write when ``batch`` is a token (``w...``)."""
    messages = []
    for partition, ids in enumerate(parts):
        task = _Task(partition, partition, "" if batch.startswith("w") else batch)
        if batch.startswith("w"):
            task.getLocalProperty = lambda name: None  # type: ignore[method-assign]
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda t=task: t))
        writer = RedisStreamWriter(settings, SCHEMA, batch if batch.startswith("w") else None)
        messages.append(writer.write(iter([batch_of(ids, failed)])))
    return messages


def published_ids(client: redis.Redis, settings: SinkSettings) -> list[int]:
    """The order ids the target holds, one per entry or key (duplicates kept)."""
    if settings.stream is not None:
        ids = [int(f[b"order_id"]) for _, f in client.xrange(settings.stream)]
        if settings.dead_letter is not None:
            ids += [int(f[b"order_id"]) for _, f in client.xrange(settings.dead_letter)]
        return ids
    found = []
    for key in client.scan_iter("order:*" if settings.value == "hash" else "doc:*", 10_000):
        if settings.value == "hash":
            found.append(int(client.hget(key, "order_id") or -1))
        else:
            found.append(int(json.loads(client.get(key) or b"{}")["order_id"]))
    return found


def leftovers(client: redis.Redis) -> list[bytes]:
    """Staging lists and plans left behind (the index set may stay, empty)."""
    return list(client.scan_iter("enrich:sink:*:staging:*")) + list(
        client.scan_iter("enrich:sink:*:publishing*")
    )


def cut_after(steps: int) -> Any:
    """A between-steps hook that kills the commit after ``steps`` steps."""

    def hook(done: Published) -> None:
        if done.steps >= steps:
            raise Died(f"after {done.steps} steps, {done.rows} rows")

    return hook


def commit_now(settings: SinkSettings, client: redis.Redis, batch: str, messages: list[Any],
               **kwargs: Any) -> Published:  # fmt: skip
    """The driver's commit as the writer runs it (a token ``w...``: a batch write's)."""
    staged = [(m.staging, m.rows) for m in messages if m.staging]
    marked = not batch.startswith("w")
    ttl = 0 if marked else settings.staging_ttl
    return two_phase.commit(client, settings.identity, batch, staged, marked=marked,
                            step=settings.max_rows, plan_ttl=ttl, **kwargs)  # fmt: skip


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_batch_is_published_in_bounded_steps_each_row_once(
    target: str, redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, maxRowsPerCommit="300", **TARGETS[target])
    parts = [range(0, 400), range(400, 650), range(650, 1000)]
    messages = stage(settings, monkeypatch, "0", parts, failed=3)
    steps: list[int] = []
    done = commit_now(settings, redis_client, "0", messages,
                      between_steps=lambda p: steps.append(p.rows))  # fmt: skip
    assert (done.skipped, done.rows, done.steps, done.longest) == (False, 1000, 4, 300)
    assert steps == [300, 600, 900]  # rows published after each step but the last
    assert sorted(published_ids(redis_client, settings)) == list(range(1000))
    if target == "dead letter":
        assert redis_client.xlen("dlq") == len(range(0, 1000, 3))
    assert committed_batch(redis_client, settings.identity) == 0
    assert leftovers(redis_client) == []

    # A replay of the committed batch id (new attempts, same rows) is skipped.
    again = stage(settings, monkeypatch, "0", parts, failed=3)
    assert commit_now(settings, redis_client, "0", again).skipped
    assert len(published_ids(redis_client, settings)) == 1000
    assert leftovers(redis_client) == []


def test_the_writer_commits_in_steps_on_the_defaults(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    """No option: 5,001 rows (refused by the old bound) go in steps of 1,000."""
    settings = settings_of(redis_server, tmp_path, stream="out")
    assert (settings.max_rows, settings.atomic) == (STEP_ROWS, False) == (1000, False)
    messages = stage(settings, monkeypatch, "0", [range(0, 2500), range(2500, 5001)])
    with caplog.at_level("INFO", logger="enrich.spark.sinks"):
        RedisStreamWriter(settings, SCHEMA, None).commit(messages, 0)
    assert redis_client.xlen("out") == 5001
    assert "5001 operations in 6 steps, at most 1000 a step" in caplog.text


@pytest.mark.parametrize("target", ["stream", "hash", "json", "dead letter"])
def test_a_commit_cut_between_steps_is_resumed_by_its_replay(
    target: str, redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """The driver dies after two steps; Spark replays the batch id: new task attempts stage
    the same rows in new lists, and the replay's commit finishes the recorded plan."""
    settings = settings_of(redis_server, tmp_path, maxRowsPerCommit="250", **TARGETS[target])
    parts = [range(0, 600), range(600, 1000)]
    first = stage(settings, monkeypatch, "7", parts, failed=4)
    with pytest.raises(Died):
        commit_now(settings, redis_client, "7", first, between_steps=cut_after(2))
    # Per-step visibility: a prefix of the batch in staging order, and nothing else.
    assert sorted(published_ids(redis_client, settings)) == list(range(500))
    if settings.stream is not None and settings.dead_letter is None:
        assert [int(f[b"order_id"]) for _, f in redis_client.xrange("out")] == list(range(500))
    assert committed_batch(redis_client, settings.identity) is None
    plan = redis_client.hgetall(plan_key(settings.identity))
    assert (plan[b"batch"], plan[b"list"], plan[b"pos"], plan[b"published"]) == (
        b"7",
        b"1",
        b"500",
        b"500",
    )

    replay = stage(settings, monkeypatch, "7", parts, failed=4)
    done = commit_now(settings, redis_client, "7", replay)
    assert (done.resumed, done.rows, done.steps) == (True, 500, 2)
    assert sorted(published_ids(redis_client, settings)) == list(range(1000))
    assert committed_batch(redis_client, settings.identity) == 7
    assert leftovers(redis_client) == []  # the replay's own staging deleted too


def test_a_replay_with_different_staging_resumes_the_recorded_plan(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """What the replay staged does not matter once a plan is fixed: it is discarded."""
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="100")
    first = stage(settings, monkeypatch, "3", [range(0, 150), range(150, 300)])
    with pytest.raises(Died):
        commit_now(settings, redis_client, "3", first, between_steps=cut_after(1))
    replay = stage(settings, monkeypatch, "3", [range(5000, 5010)])  # other rows, other count
    done = commit_now(settings, redis_client, "3", replay)
    assert (done.resumed, done.rows) == (True, 200)
    ids = [int(f[b"order_id"]) for _, f in redis_client.xrange("out")]
    assert ids == list(range(300))
    assert leftovers(redis_client) == []


def test_abort_during_a_started_publish_keeps_it_for_the_replay(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="100")
    first = stage(settings, monkeypatch, "2", [range(0, 150), range(150, 300)])
    with pytest.raises(Died):
        commit_now(settings, redis_client, "2", first, between_steps=cut_after(1))
    # Another attempt's staging of the same batch, not in the plan: abort deletes it.
    stray = stage(settings, monkeypatch, "2", [range(0, 10)])
    with caplog.at_level("WARNING", logger="enrich.spark.sinks"):
        RedisStreamWriter(settings, SCHEMA, None).abort([*first, *stray, None], 2)
    assert "batch 2 aborted after 100 of its rows were published" in caplog.text
    for message in first:
        assert redis_client.llen(message.staging or "") == message.rows  # kept
    assert not redis_client.exists(stray[0].staging or "")
    assert redis_client.exists(plan_key(settings.identity))
    assert redis_client.xlen("out") == 100  # nothing published undone, nothing added

    RedisStreamWriter(settings, SCHEMA, None).commit(stage(settings, monkeypatch, "2", []), 2)
    assert [int(f[b"order_id"]) for _, f in redis_client.xrange("out")] == list(range(300))
    assert leftovers(redis_client) == []


def test_a_staging_list_lost_mid_publish_stops_it_and_says_what_was_published(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="100")
    first = stage(settings, monkeypatch, "4", [range(0, 150), range(150, 300)])
    with pytest.raises(Died):
        commit_now(settings, redis_client, "4", first, between_steps=cut_after(1))
    lost = first[1].staging or ""
    redis_client.delete(lost)  # say it expired (stagingTtl) while the query was down
    with pytest.raises(StagingMismatch) as refused:
        commit_now(settings, redis_client, "4", stage(settings, monkeypatch, "4", [range(3)]))
    error = refused.value
    assert (error.staging, error.expected, error.found, error.published) == (lost, 150, 0, 100)
    assert "batch 4 stopped after 100 of its operations were published" in str(error)
    assert redis_client.xlen("out") == 100  # that step published nothing
    assert committed_batch(redis_client, settings.identity) is None


def test_a_plan_of_another_batch_is_not_touched(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="100")
    first = stage(settings, monkeypatch, "5", [range(0, 300)])
    with pytest.raises(Died):
        commit_now(settings, redis_client, "5", first, between_steps=cut_after(1))
    other = stage(settings, monkeypatch, "6", [range(300, 400)])
    with pytest.raises(PublishConflict, match="still publishing batch 5"):
        commit_now(settings, redis_client, "6", other)
    assert redis_client.xlen("out") == 100
    assert redis_client.llen(first[0].staging or "") == 300


def test_a_batch_write_cut_mid_publish_keeps_its_prefix_and_drops_the_rest(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    """A df.write has no batch id and no replay: the steps done stay, abort drops the rest."""
    settings = SinkSettings.of({"url": redis_server.url, "stream": "out",
                                "maxRowsPerCommit": "100"})  # fmt: skip
    token = "wcut"
    messages = stage(settings, monkeypatch, token, [range(0, 250)])
    with pytest.raises(Died):
        commit_now(settings, redis_client, token, messages, between_steps=cut_after(1))
    plan = plan_key(settings.identity, token)
    assert 0 < redis_client.ttl(plan) <= settings.staging_ttl  # a plan left behind expires
    with caplog.at_level("WARNING", logger="enrich.spark.sinks"):
        RedisBatchWriter(settings, SCHEMA, token).abort(messages)
    assert "batch write aborted after 100 of its rows were published" in caplog.text
    assert [int(f[b"order_id"]) for _, f in redis_client.xrange("out")] == list(range(100))
    assert leftovers(redis_client) == []


def test_atomic_commit_publishes_a_batch_in_one_script(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, stream="out", atomicCommit="true")
    assert (settings.atomic, settings.max_rows) == (True, None)
    messages = stage(settings, monkeypatch, "0", [range(0, 3000), range(3000, 7000)])
    staged = [(m.staging or "", m.rows) for m in messages]
    done = two_phase.commit(redis_client, settings.identity, "0", staged, marked=True, step=None,
                            between_steps=cut_after(0))  # fmt: skip
    assert (done.steps, done.longest, done.rows) == (1, 7000, 7000)
    assert redis_client.xlen("out") == 7000 and leftovers(redis_client) == []
    with pytest.raises(ValueError, match="option atomicCommit must be true or false"):
        settings_of(redis_server, tmp_path, stream="out", atomicCommit="yes")


@pytest.fixture
def slowlog(redis_client: redis.Redis) -> Any:
    old = redis_client.config_get("slowlog-*")
    # 1 ms: every step (1,000 operations take 3.5 ms or more), not the commands a script
    # runs (Redis 7 logs those too, and 200,000 of them would crowd the steps out).
    redis_client.config_set("slowlog-log-slower-than", 1000)
    redis_client.config_set("slowlog-max-len", 100_000)
    redis_client.slowlog_reset()
    yield redis_client
    redis_client.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
    redis_client.config_set("slowlog-max-len", old["slowlog-max-len"])


@pytest.mark.slow
def test_a_large_batch_runs_no_command_longer_than_a_step(
    redis_server: Any, slowlog: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """200,000 rows on the defaults: 200 steps of 1,000 operations each. The bound is
    asserted on operations per script (wall time is noisy on a shared machine); SLOWLOG
    gives the longest command for the record."""
    settings = settings_of(redis_server, tmp_path, stream="out")
    rows = 200_000
    parts = [range(n, n + 50_000) for n in range(0, rows, 50_000)]
    messages = stage(settings, monkeypatch, "0", parts)
    slowlog.slowlog_reset()
    per_step: list[int] = []
    done = commit_now(settings, slowlog, "0", messages,
                      between_steps=lambda p: per_step.append(p.rows))  # fmt: skip
    assert (done.rows, done.steps, done.longest) == (rows, 200, STEP_ROWS)
    assert per_step == [STEP_ROWS * n for n in range(1, 200)]
    entries = slowlog.slowlog_get(100_000)
    scripts = [e for e in entries if e["command"].startswith((b"EVALSHA", b"EVAL "))]
    assert len(scripts) == 200
    in_order = [e["duration"] / 1000 for e in sorted(scripts, key=lambda e: e["id"])]
    slowest = max(range(len(in_order)), key=in_order.__getitem__)
    print(f"slowest step: {slowest + 1} of {len(in_order)}")
    times = sorted(in_order)
    print(
        f"200k-row stepwise commit, ms a step: median {times[100]:.1f}, longest {times[-1]:.1f}; "
        f"longest command {max(e['duration'] for e in entries) / 1000:.1f} ms"
    )
    assert slowlog.xlen("out") == rows
    ids = {int(f[b"order_id"]) for _, f in slowlog.xrange("out")}
    assert len(ids) == rows


def test_a_persistent_redis_restarted_between_steps_publishes_each_row_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Redis (AOF, fsync always) restarts between two steps: the plan and its cursor
    survive, and the publish goes on from the cursor (the client reconnects) or, if the
    commit fails, its replay resumes it."""
    server = RedisServer(tmp_path / "redis", extra_config=["appendonly yes", "appendfsync always"])
    server.start()
    try:
        settings = settings_of(server, tmp_path, stream="out", maxRowsPerCommit="100")
        messages = stage(settings, monkeypatch, "0", [range(0, 150), range(150, 250)])
        restarts: list[int] = []

        def restart(done: Published) -> None:
            if not restarts:
                server.restart()
                restarts.append(done.rows)

        client = redis_options.connect(server.url)
        try:
            done = commit_now(settings, client, "0", messages, between_steps=restart)
        except redis.ConnectionError:  # no retry in the client: Spark replays the batch
            replay = stage(settings, monkeypatch, "0", [range(0, 150), range(150, 250)])
            done = commit_now(settings, redis_options.connect(server.url), "0", replay)
            assert done.resumed
        check = server.client()
        assert restarts == [100]
        assert [int(f[b"order_id"]) for _, f in check.xrange("out")] == list(range(250))
        assert committed_batch(check, settings.identity) == 0
        assert leftovers(check) == []
    finally:
        server.stop()


def expire_now(client: redis.Redis, *keys: str) -> None:
    """Make ``keys`` expire as their TTL would (PEXPIRE 1), and wait until Redis says
    they are gone (a condition, not a sleep)."""
    import time

    for key in keys:
        client.pexpire(key, 1)
    deadline = time.monotonic() + 10
    while client.exists(*keys) and time.monotonic() < deadline:
        client.ping()
    assert not client.exists(*keys)


def test_a_plan_and_the_staging_it_reads_expire_together(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """One TTL (stagingTtl) for the plan and its lists, set by each step; the trace that
    names the plan once they are gone has none."""
    settings = settings_of(
        redis_server, tmp_path, stream="out", maxRowsPerCommit="100", stagingTtl="5000"
    )
    first = stage(settings, monkeypatch, "4", [range(0, 150), range(150, 300)])
    for message in first:  # as if staged long ago: the commit's steps refresh them
        redis_client.expire(message.staging or "", 60)
    with pytest.raises(Died):
        two_phase.commit(redis_client, settings.identity, "4",
                         [(m.staging, m.rows) for m in first], marked=True, step=100,
                         plan_ttl=settings.staging_ttl, between_steps=cut_after(1))  # fmt: skip
    plan = plan_key(settings.identity)
    ttls = [redis_client.ttl(k) for k in (plan, *(m.staging or "" for m in first))]
    assert all(4990 <= t <= 5000 for t in ttls), ttls
    trace = two_phase.started_key(settings.identity)
    assert redis_client.ttl(trace) == -1
    assert redis_client.hgetall(trace) == {b"batch": b"4", b"published": b"100"}


@pytest.mark.parametrize("lost", ["plan and staging expired", "one staging list lost"])
def test_a_lost_plan_is_named_and_closed_without_publishing_twice(
    lost: str, redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """The query stops mid-publish and is down past stagingTtl: the next commit names the
    plan and the way out; with closeLostPlan the plan is closed (its published part is not
    published again, its batch's replay is skipped) and later batches go on."""
    options = {"stream": "out", "maxRowsPerCommit": "100"}
    settings = settings_of(redis_server, tmp_path, **options)
    first = stage(settings, monkeypatch, "4", [range(0, 150), range(150, 300)])
    with pytest.raises(Died):
        two_phase.commit(redis_client, settings.identity, "4",
                         [(m.staging, m.rows) for m in first], marked=True, step=100,
                         plan_ttl=settings.staging_ttl, between_steps=cut_after(1))  # fmt: skip
    if lost == "one staging list lost":
        redis_client.delete(first[1].staging or "")
        error: type[Exception] = StagingMismatch
    else:
        expire_now(redis_client, plan_key(settings.identity), *(m.staging or "" for m in first))
        error = two_phase.PlanExpired
    writer = RedisStreamWriter(settings, SCHEMA, None)
    for _ in range(2):  # every commit says so, and publishes nothing
        replay = stage(settings, monkeypatch, "4", [range(0, 150), range(150, 300)])
        with pytest.raises(error, match="closeLostPlan") as refused:
            writer.commit(replay, 4)
        assert "after 100 of its operations" in str(refused.value)
        assert "\n" not in str(refused.value)
        writer.abort(replay, 4)
        assert redis_client.xlen("out") == 100

    closing = RedisStreamWriter(
        settings_of(redis_server, tmp_path, **options, closeLostPlan="true"), SCHEMA, None
    )
    closing.commit(stage(settings, monkeypatch, "4", [range(0, 150), range(150, 300)]), 4)
    assert [int(f[b"order_id"]) for _, f in redis_client.xrange("out")] == list(range(100))
    assert committed_batch(redis_client, settings.identity) == 4
    closing.commit(stage(settings, monkeypatch, "5", [range(300, 350)]), 5)
    ids = [int(f[b"order_id"]) for _, f in redis_client.xrange("out")]
    assert ids == [*range(100), *range(300, 350)]  # nothing twice; 100..299 dropped, said
    assert leftovers(redis_client) == []
    assert not redis_client.exists(two_phase.started_key(settings.identity))


def test_close_plan_leaves_a_whole_plan_to_its_replay(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="100")
    first = stage(settings, monkeypatch, "4", [range(0, 300)])
    with pytest.raises(Died):
        commit_now(settings, redis_client, "4", first, between_steps=cut_after(1))
    with pytest.raises(ValueError, match="has all its staging"):
        two_phase.close_plan(redis_client, settings.identity, keyed=False)
    assert two_phase.close_plan(redis_client, "nobody", keyed=False) is None
    commit_now(settings, redis_client, "4", [])
    assert [int(f[b"order_id"]) for _, f in redis_client.xrange("out")] == list(range(300))


def test_the_default_step_is_stated_once_and_the_docs_agree() -> None:
    """maxRowsPerCommit's default is STEP_ROWS: the option's docstring and the docs'
    table name that figure, and no other."""
    import re

    from enrich.spark.sink.redis import data_source

    root = Path(__file__).resolve().parents[3]
    figure = f"{STEP_ROWS:,}"
    doc = data_source.__doc__ or ""
    option = doc[doc.index("maxRowsPerCommit:") : doc.index("atomicCommit:")]
    assert re.findall(r"default[^;)]*?(\d[\d,]*)", option)[0] == figure
    table = (root / "docs/data-sources.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| `maxRowsPerCommit`"))
    assert re.findall(r"\(default (\d[\d,]*)", row) == [figure]


def test_a_plan_staged_as_json_by_an_earlier_version_is_resumed_and_published_once(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Staging was a JSON array per row before it became MessagePack strings: a plan an
    earlier version started (its lists in JSON) is finished by this one, beside lists in
    the new form, each row applied once with its bytes unchanged."""
    settings = settings_of(redis_server, tmp_path, stream="out")
    identity = settings.identity
    old = two_phase.staging_key(identity, "3", 0, "a")
    new = two_phase.staging_key(identity, "3", 1, "b")
    before = [["x", "out", "order_id", str(i), "name", f'n"{i}\\'] for i in range(5)]
    before.append(["h", "order:5", "order_id", "5"])
    redis_client.sadd(two_phase.index_key(identity), old, new)
    redis_client.rpush(old, *[json.dumps(op, ensure_ascii=False) for op in before])
    redis_client.rpush(new, *[pack(["x", "out", "order_id", str(i)]) for i in range(6, 9)])
    assert not pack(["x"]).startswith(b"[")  # the two lists are in the two forms
    staged = [(old, 6), (new, 3)]
    with pytest.raises(Died):
        two_phase.commit(redis_client, identity, "3", staged, marked=True, step=4,
                         between_steps=cut_after(1))  # fmt: skip
    done = two_phase.commit(redis_client, identity, "3", staged, marked=True, step=4)
    assert (done.resumed, done.rows) == (True, 5)
    entries = [f for _, f in redis_client.xrange("out")]
    assert [int(f[b"order_id"]) for f in entries] == [0, 1, 2, 3, 4, 6, 7, 8]
    assert entries[1][b"name"] == b'n"1\\'
    assert redis_client.hgetall("order:5") == {b"order_id": b"5"}
    assert committed_batch(redis_client, identity) == 3
    assert leftovers(redis_client) == []
