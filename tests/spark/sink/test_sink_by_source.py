"""Exactly once keyed by the source record (``sourceIdColumn``): each source entry is
published at most once whatever batch carries it, so batches re-cut on a replay (other
ids, other bounds, a batch id coming back with other rows) neither lose nor double."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
import redis
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from enrich.spark.sink.redis import two_phase
from enrich.spark.sink.redis.by_source import check_writer
from enrich.spark.sink.redis.codec import pack
from enrich.spark.sink.redis.data_source import RedisSinkDataSource, RedisStreamWriter, StagedPart
from enrich.spark.sink.redis.row_writes import SinkSettings
from tests.spark.sink.test_sink_commit import _Task

pytestmark = [pytest.mark.timeout(120)]

SCHEMA = StructType(
    [
        StructField("stream_id", StringType()),
        StructField("stream_key", StringType()),
        StructField("order_id", LongType()),
        StructField("enrich_error", StringType()),
    ]
)
ARROW = pa.schema(
    [("stream_id", pa.string()), ("stream_key", pa.string()), ("order_id", pa.int64()),
     ("enrich_error", pa.string())]
)  # fmt: skip
TARGETS = {
    "stream": {"stream": "out"},
    "hash": {"key": "order:{order_id}"},
    "json": {"key": "doc:{order_id}", "value": "json"},
    "dead letter": {"stream": "out", "dead_letter": "dlq"},
}


def entry_id(n: int) -> str:
    """Entry ids whose text crosses digit counts (9-0 < 10-0, 1-9 < 1-10)."""
    return f"{7 + n // 3}-{n % 3 * 5}"


def settings_of(server: Any, tmp_path: Path, **options: str) -> SinkSettings:
    base = {"url": server.url, "checkpointLocation": str(tmp_path / "ck"),
            "sourceIdColumn": "stream_id"}  # fmt: skip
    return SinkSettings.of({**base, **options})


def rows(ids: list[int], stream: str = "orders", failed: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "stream_id": [entry_id(i) for i in ids],
            "stream_key": [stream] * len(ids),
            "order_id": ids,
            "enrich_error": [f"e{i}" if failed and i % failed == 0 else None for i in ids],
        },
        schema=ARROW,
    )


def stage(settings: SinkSettings, monkeypatch: Any, batch: str,
          parts: list[pa.RecordBatch]) -> list[StagedPart]:  # fmt: skip
    """Each part written by a task of its own of ``batch`` (the executor half)."""
    messages = []
    for partition, part in enumerate(parts):
        task = _Task(partition, partition, batch)
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda t=task: t))
        writer = RedisStreamWriter(settings, SCHEMA, None)
        messages.append(writer.write(iter([part])))
    return messages


def run_batch(settings: SinkSettings, monkeypatch: Any, batch: int,
              parts: list[pa.RecordBatch]) -> None:  # fmt: skip
    """A micro-batch through both halves of the writer: tasks stage, the driver commits."""
    messages = stage(settings, monkeypatch, str(batch), parts)
    RedisStreamWriter(settings, SCHEMA, None).commit(messages, batch)


def published(client: redis.Redis, settings: SinkSettings) -> list[int]:
    """The order ids the target (and the dead letter) holds, duplicates kept."""
    if settings.stream is not None:
        ids = [int(f[b"order_id"]) for _, f in client.xrange(settings.stream)]
        if settings.dead_letter is not None:
            ids += [int(f[b"order_id"]) for _, f in client.xrange(settings.dead_letter)]
        return ids
    if settings.value == "hash":
        return [int(client.hget(k, "order_id") or -1) for k in client.scan_iter("order:*")]
    return [int(json.loads(client.get(k) or b"{}")["order_id"]) for k in client.scan_iter("doc:*")]


def leftovers(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter("enrich:sink:*:staging:*")) + list(
        client.scan_iter("enrich:sink:*:publishing*")
    )


def die_after_first_step(client: redis.Redis, settings: SinkSettings, batch: str,
                         staged: list[tuple[Any, int]], **options: Any) -> None:  # fmt: skip
    """A commit of ``batch`` whose driver dies after its first step (15 rows)."""

    class Died(Exception):
        pass

    def die(done: two_phase.Published) -> None:
        raise Died

    with pytest.raises(Died):
        two_phase.commit(client, settings.identity, batch, staged, marked=True, step=15,
                         between_steps=die, source=settings.source, **options)  # fmt: skip


@pytest.mark.parametrize("target", list(TARGETS))
def test_batches_re_cut_on_a_replay_publish_each_entry_once(
    target: str, redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, **TARGETS[target])
    failed = 7 if target == "dead letter" else 0
    run_batch(settings, monkeypatch, 0, [rows(list(range(0, 60)), failed=failed),
                                         rows(list(range(60, 100)), failed=failed)])  # fmt: skip
    # The same batch id back with other bounds (async progress tracking re-plans it),
    # then a later id, then an id going backwards: each carries entries seen before.
    run_batch(settings, monkeypatch, 0, [rows(list(range(50, 130)), failed=failed),
                                         rows(list(range(130, 200)), failed=failed)])  # fmt: skip
    run_batch(settings, monkeypatch, 5, [rows(list(range(150, 250)), failed=failed)])
    run_batch(settings, monkeypatch, 2, [rows(list(range(240, 300)), failed=failed)])
    ids = published(redis_client, settings)
    assert sorted(ids) == list(range(300))  # none lost, none twice
    marks = two_phase.published_marks(redis_client, settings.identity)
    assert marks == {"*": entry_id(299)}
    assert leftovers(redis_client) == []


def test_a_publish_cut_between_steps_is_finished_before_a_re_cut_batch(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """The driver dies with part of batch 7 published (a plan with its cursor); after the
    restart the batches are cut otherwise: batch 6 carries batch 7's rows and more. Its
    commit finishes batch 7's plan, then publishes what is new."""
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="15")
    messages = stage(settings, monkeypatch, "7", [rows(list(range(0, 40))),
                                                  rows(list(range(40, 70)))])  # fmt: skip
    staged = [(m.staging, m.rows) for m in messages if m.staging]

    class Died(Exception):
        pass

    def die(done: two_phase.Published) -> None:
        if done.steps >= 2:
            raise Died

    with pytest.raises(Died):
        two_phase.commit(redis_client, settings.identity, "7", staged, marked=True, step=15,
                         between_steps=die, source=settings.source)  # fmt: skip
    assert sorted(published(redis_client, settings)) == list(range(30))  # two steps of 15
    messages = stage(settings, monkeypatch, "6", [rows(list(range(0, 50))),
                                                  rows(list(range(50, 90)))])  # fmt: skip
    staged = [(m.staging, m.rows) for m in messages if m.staging]
    done = two_phase.commit(redis_client, settings.identity, "6", staged, marked=True, step=15,
                            source=settings.source)  # fmt: skip
    assert done.resumed
    assert sorted(published(redis_client, settings)) == list(range(90))
    assert done.rows == 60  # batch 7's last 40, then 70..89
    assert done.replayed == 70  # batch 6's rows up to 69: published by batch 7's plan
    assert leftovers(redis_client) == []


def test_the_rows_of_one_entry_all_go_out_and_none_twice(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """A 1:N join gives one entry several rows: they share the entry id."""
    settings = settings_of(redis_server, tmp_path, stream="out")
    batch = pa.RecordBatch.from_pydict(
        {"stream_id": ["5-0", "5-0", "5-0", "5-1"], "stream_key": ["o"] * 4,
         "order_id": [1, 2, 3, 4], "enrich_error": [None] * 4},
        schema=ARROW,
    )  # fmt: skip
    run_batch(settings, monkeypatch, 0, [batch])
    run_batch(settings, monkeypatch, 1, [batch])
    assert published(redis_client, settings) == [1, 2, 3, 4]


def test_several_source_streams_keep_marks_of_their_own(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, stream="out", sourceStreamColumn="stream_key")
    # Stream b's ids are far below stream a's: one mark for both would drop b's rows.
    a = pa.RecordBatch.from_pydict(
        {"stream_id": ["900-0", "901-0"], "stream_key": ["a", "a"], "order_id": [1, 2],
         "enrich_error": [None, None]}, schema=ARROW)  # fmt: skip
    b = pa.RecordBatch.from_pydict(
        {"stream_id": ["3-0", "4-0"], "stream_key": ["b", "b"], "order_id": [3, 4],
         "enrich_error": [None, None]}, schema=ARROW)  # fmt: skip
    run_batch(settings, monkeypatch, 0, [a])
    run_batch(settings, monkeypatch, 1, [b, a])
    assert sorted(published(redis_client, settings)) == [1, 2, 3, 4]
    assert two_phase.published_marks(redis_client, settings.identity) == {"a": "901-0", "b": "4-0"}


@pytest.mark.parametrize(
    ("ids", "stream", "says"),
    [
        ([None], "o", "column 'stream_id' (sourceIdColumn) holds None"),
        (["12"], "o", "holds '12', not an entry id"),
        (["012-1"], "o", "holds '012-1'"),
        (["12-1"], None, "column 'stream_key' (sourceStreamColumn) is null"),
    ],
)
def test_a_row_without_its_source_entry_fails_its_task_naming_it(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any,
    ids: list[str | None], stream: str | None, says: str,
) -> None:  # fmt: skip
    settings = settings_of(redis_server, tmp_path, stream="out", sourceStreamColumn="stream_key")
    bad = pa.RecordBatch.from_pydict(
        {"stream_id": ids, "stream_key": [stream], "order_id": [41], "enrich_error": [None]},
        schema=ARROW,
    )
    with pytest.raises(ValueError, match="order_id': 41") as failure:
        stage(settings, monkeypatch, "0", [bad])
    assert says in str(failure.value)
    assert redis_client.xlen("out") == 0


def test_a_staged_row_without_an_id_stops_the_publish_on_it(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Staged by hand (the writer never stages such a row): the rows before it are
    published, the cursor stays on it; once it is mended the publish goes on."""
    settings = settings_of(redis_server, tmp_path, stream="out")
    identity = settings.identity
    staging = two_phase.staging_key(identity, "0", 0, "a")
    ops = [["x", "out", "stream_id", entry_id(i), "order_id", str(i)] for i in range(10)]
    ops[6] = ["x", "out", "order_id", "6"]
    redis_client.sadd(two_phase.index_key(identity), staging)
    redis_client.rpush(staging, *[pack(op) for op in ops])  # type: ignore[arg-type]
    shown = r'sourceIdColumn\), .*: \["x", "out", "order_id", "6"\]'  # the row, as text
    with pytest.raises(two_phase.SourceIdMissing, match=shown):
        two_phase.commit(redis_client, identity, "0", [(staging, 10)], marked=True, step=4,
                         source=settings.source)  # fmt: skip
    assert published(redis_client, settings) == [0, 1, 2, 3, 4, 5]
    redis_client.lset(staging, 6, pack(["x", "out", "stream_id", entry_id(6), "order_id", "6"]))
    two_phase.commit(redis_client, identity, "0", [(staging, 10)], marked=True, step=4,
                     source=settings.source)  # fmt: skip
    assert published(redis_client, settings) == list(range(10))


def test_the_options_refuse_what_would_break_exactly_once(
    redis_server: Any, tmp_path: Path
) -> None:
    base = {"url": redis_server.url, "stream": "out", "checkpointLocation": str(tmp_path)}
    with pytest.raises(ValueError, match='sourceIdColumn needs mode "transactional"'):
        SinkSettings.of({**base, "mode": "idempotent", "sourceIdColumn": "stream_id"})
    with pytest.raises(ValueError, match="needs option sourceIdColumn"):
        SinkSettings.of({**base, "sourceStreamColumn": "stream_key"})
    with pytest.raises(ValueError, match=r"async progress tracking .*asyncProgressTracking"):
        SinkSettings.of({**base, "asyncProgressTrackingEnabled": "true"})
    keyed = {**base, "sourceIdColumn": "stream_id", "asyncProgressTrackingEnabled": "True"}
    assert SinkSettings.of(keyed).async_progress
    source = SinkSettings.of(keyed).source
    with pytest.raises(ValueError, match="is for streaming queries"):
        RedisSinkDataSource(keyed).writer(SCHEMA, False)
    with pytest.raises(ValueError, match="names column 'entry', which the DataFrame"):
        check_writer(two_phase.SourceFields("entry"), SCHEMA, streaming=True)
    scored = StructType([*SCHEMA.fields, StructField("score", DoubleType())])
    with pytest.raises(ValueError, match=r"must be a string .* or a whole number .* got double"):
        check_writer(two_phase.SourceFields("score"), scored, streaming=True)
    check_writer(two_phase.SourceFields("order_id"), SCHEMA, streaming=True)  # an offset
    check_writer(source, SCHEMA, streaming=True)


def test_keyed_mode_writes_no_batch_marker_that_could_move_backwards(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """Batch ids are not trusted keyed by the source record (a re-cut batch may come back
    with a lower id): the committed-batch marker is not written at all, so nothing reads
    a marker that went from 7 back to 2."""
    settings = settings_of(redis_server, tmp_path, stream="out")
    run_batch(settings, monkeypatch, 7, [rows(list(range(0, 20)))])
    assert not redis_client.exists(two_phase.marker_key(settings.identity))
    run_batch(settings, monkeypatch, 2, [rows(list(range(10, 40)))])
    assert two_phase.committed_batch(redis_client, settings.identity) is None
    assert sorted(published(redis_client, settings)) == list(range(40))


def test_a_lost_plan_keyed_by_source_is_closed_at_its_marks_without_a_double(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """Keyed by the source record, closing a lost plan raises each mark to the largest
    entry id the plan reached: the re-cut replay publishes only the entries after it."""
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="15")
    messages = stage(settings, monkeypatch, "7", [rows(list(range(0, 40)))])
    staged = [(m.staging, m.rows) for m in messages if m.staging]

    die_after_first_step(redis_client, settings, "7", staged, plan_ttl=60)
    redis_client.delete(two_phase.plan_key(settings.identity), *(s for s, _ in staged))
    replay = stage(settings, monkeypatch, "3", [rows(list(range(0, 60)))])
    with pytest.raises(two_phase.PlanExpired, match="closeLostPlan"):
        RedisStreamWriter(settings, SCHEMA, None).commit(replay, 3)
    closing = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="15",
                          closeLostPlan="true")  # fmt: skip
    RedisStreamWriter(closing, SCHEMA, None).commit(replay, 3)
    assert sorted(published(redis_client, settings)) == list(range(60))  # none twice
    assert two_phase.published_marks(redis_client, settings.identity) == {"*": entry_id(59)}
