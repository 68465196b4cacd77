"""Publishing from the tasks (``publishFrom=tasks``): keyed by the source record, each task
publishes its own rows and the commit only raises the marks; whatever re-cuts, retries or
crashes come between, each source entry is published once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
import redis

from enrich.spark.sink import hooks
from enrich.spark.sink.redis import data_source, two_phase
from enrich.spark.sink.redis.data_source import RedisSinkDataSource, RedisStreamWriter, StagedPart
from enrich.spark.sink.redis.two_phase import from_tasks
from enrich.spark.sink.redis.two_phase.errors import SourceOrderBroken
from tests.spark.sink.test_sink_by_source import (
    ARROW,
    SCHEMA,
    TARGETS,
    die_after_first_step,
    entry_id,
    leftovers,
    published,
    rows,
    settings_of,
    stage,
)
from tests.spark.sink.test_sink_commit import _Task

pytestmark = [pytest.mark.timeout(120)]


def start(server: Any, tmp_path: Path, **options: str) -> RedisStreamWriter:
    """A run of the query: the writer Spark gets from the sink when the query starts."""
    base = {"url": server.url, "checkpointLocation": str(tmp_path / "ck"),
            "sourceIdColumn": "stream_id", "publishFrom": "tasks"}  # fmt: skip
    writer = RedisSinkDataSource({**base, **options}).streamWriter(SCHEMA, False)
    assert isinstance(writer, RedisStreamWriter)
    return writer


def task(writer: RedisStreamWriter, monkeypatch: Any, batch: int, partition: int,
         part: pa.RecordBatch, attempt: int = 0) -> int:  # fmt: skip
    """One task attempt of ``batch`` writing ``part``; returns its commit message."""
    context = _Task(partition, attempt, str(batch))
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: context))
    return writer.write(iter([part]))


def commit(server: Any, tmp_path: Path, batch: int, messages: list[StagedPart],
           **options: str) -> None:  # fmt: skip
    """The batch's commit, on a writer of its own (Spark's commit process asks the sink
    for a new writer at each commit)."""
    start(server, tmp_path, **options).commit(messages, batch)


def batch_of(writer: RedisStreamWriter, monkeypatch: Any, batch: int,
             parts: list[pa.RecordBatch]) -> None:  # fmt: skip
    messages = [task(writer, monkeypatch, batch, p, part) for p, part in enumerate(parts)]
    writer.commit(messages, batch)


def pending(client: redis.Redis) -> int:
    return sum(client.hlen(k) for k in client.scan_iter("enrich:sink:*:pending"))


@pytest.mark.parametrize("target", list(TARGETS))
def test_re_cut_batches_of_a_restarted_run_publish_each_entry_once(
    target: str, redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    failed = 7 if target == "dead letter" else 0
    first = start(redis_server, tmp_path, **TARGETS[target])
    settings = first.settings
    messages = [task(first, monkeypatch, 0, 0, rows(list(range(0, 60)), failed=failed))]
    # Published by the task itself: readers see the rows before the batch commits.
    assert sorted(published(redis_client, settings)) == list(range(60))
    messages.append(task(first, monkeypatch, 0, 1, rows(list(range(60, 100)), failed=failed)))
    commit(redis_server, tmp_path, 0, messages, **TARGETS[target])
    assert two_phase.published_marks(redis_client, settings.identity) == {"*": entry_id(99)}
    # Batch 1 published by its tasks, then the run dies before its commit.
    task(first, monkeypatch, 1, 0, rows(list(range(100, 150)), failed=failed))
    task(first, monkeypatch, 1, 1, rows(list(range(150, 180)), failed=failed))
    assert pending(redis_client) == 2  # the spans of batch 1, settled by no commit
    # The next run re-plans from older offsets, cut otherwise, under the same batch ids.
    second = start(redis_server, tmp_path, **TARGETS[target])
    batch_of(second, monkeypatch, 1, [rows(list(range(90, 130)), failed=failed),
                                      rows(list(range(130, 200)), failed=failed)])  # fmt: skip
    batch_of(second, monkeypatch, 2, [rows(list(range(200, 300)), failed=failed)])
    assert sorted(published(redis_client, settings)) == list(range(300))  # none lost, none twice
    assert two_phase.published_marks(redis_client, settings.identity) == {"*": entry_id(299)}
    assert pending(redis_client) == 0
    assert leftovers(redis_client) == []  # nothing staged


def test_a_span_a_crashed_run_left_above_the_marks_stays_until_a_batch_passes_it(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """The first run's batch 1: its second task published 150..179, its first died
    before writing. The next run's batch 1 is cut shorter (90..119): its commit must not
    take the old span as its own, or 120..149 would be lost behind the mark."""
    first = start(redis_server, tmp_path, stream="out")
    batch_of(first, monkeypatch, 0, [rows(list(range(0, 100)))])
    task(first, monkeypatch, 1, 1, rows(list(range(150, 180))))
    second = start(redis_server, tmp_path, stream="out")
    batch_of(second, monkeypatch, 1, [rows(list(range(90, 120)))])
    identity = second.settings.identity
    assert two_phase.published_marks(redis_client, identity) == {"*": entry_id(119)}
    assert from_tasks.unsettled(redis_client, identity) == 1  # the old span, above the mark
    batch_of(second, monkeypatch, 2, [rows(list(range(120, 160))), rows(list(range(160, 200)))])
    assert sorted(published(redis_client, second.settings)) == list(range(200))
    assert from_tasks.unsettled(redis_client, identity) == 0


def test_a_retried_attempt_skips_what_the_first_published_and_splits_no_entry(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """Steps of 10 operations over entries of 3 rows each (a 1:N join): the first
    attempt dies after two steps; the retry publishes the rest, each row once."""
    monkeypatch.setattr(data_source, "STAGE_CHUNK", 7)  # gathered across Arrow batches
    writer = start(redis_server, tmp_path, stream="out", maxRowsPerCommit="10")
    ids = [i for i in range(20) for _ in range(3)]
    part = pa.RecordBatch.from_pydict(
        {"stream_id": [entry_id(i) for i in ids], "stream_key": ["o"] * 60,
         "order_id": list(range(60)), "enrich_error": [None] * 60},
        schema=ARROW,
    )  # fmt: skip
    chunks = []

    class Died(Exception):
        pass

    def die(point: str, batch: Any) -> None:
        if point == "mid_write":
            chunks.append(len(published(redis_client, writer.settings)))
            if len(chunks) == 2:
                raise Died

    monkeypatch.setattr(hooks, "pause_if_asked", die)
    with pytest.raises(Died):
        task(writer, monkeypatch, 0, 0, part, attempt=0)
    # Each chunk ends on an entry's last row: 9 rows (3 entries), then 18.
    assert chunks == [9, 18]
    monkeypatch.setattr(hooks, "pause_if_asked", lambda point, batch: None)
    message = task(writer, monkeypatch, 0, 0, part, attempt=1)
    assert message.rows == 60 - 18
    commit(redis_server, tmp_path, 0, [message], stream="out", maxRowsPerCommit="10")
    assert published(redis_client, writer.settings) == list(range(60))  # in order, once


def test_an_entry_with_more_rows_than_a_step_goes_out_whole(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    writer = start(redis_server, tmp_path, stream="out", maxRowsPerCommit="10")
    ids = [1] * 2 + [2] * 25 + [3] * 4
    part = pa.RecordBatch.from_pydict(
        {"stream_id": [entry_id(i) for i in ids], "stream_key": ["o"] * len(ids),
         "order_id": list(range(len(ids))), "enrich_error": [None] * len(ids)},
        schema=ARROW,
    )  # fmt: skip
    batch_of(writer, monkeypatch, 0, [part])
    batch_of(writer, monkeypatch, 1, [part])  # a replay: all published already
    assert published(redis_client, writer.settings) == list(range(len(ids)))


def test_rows_out_of_order_fail_their_task_before_anything_is_written(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    writer = start(redis_server, tmp_path, stream="out")
    with pytest.raises(SourceOrderBroken) as raised:
        task(writer, monkeypatch, 0, 0, rows([1, 2, 5, 3, 4]))
    message = str(raised.value)
    assert f"entry id {entry_id(3)} came after {entry_id(5)}" in message
    assert "partition 0 of batch 0" in message and 'publishFrom", "driver"' in message
    assert published(redis_client, writer.settings) == []


def test_a_stream_spread_over_two_tasks_of_a_batch_is_refused(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """A shuffle gives two tasks interleaved ids of one stream: a span of either would
    cover rows of the other, so the second task fails before it writes."""
    writer = start(redis_server, tmp_path, stream="out")
    task(writer, monkeypatch, 0, 0, rows([0, 2, 4, 6]))
    with pytest.raises(SourceOrderBroken) as raised:
        task(writer, monkeypatch, 0, 1, rows([1, 3, 5, 7]))
    assert "interleave with those of partition 0" in str(raised.value)
    assert sorted(published(redis_client, writer.settings)) == [0, 2, 4, 6]


def test_several_source_streams_keep_marks_and_spans_of_their_own(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    writer = start(redis_server, tmp_path, stream="out", sourceStreamColumn="stream_key")
    # Stream b's ids are far below stream a's; two tasks of one batch, one stream each.
    batch_of(writer, monkeypatch, 0, [rows([40, 41], "a"), rows([1, 2], "b")])
    batch_of(writer, monkeypatch, 1, [rows([41, 42], "a"), rows([2, 3], "b")])
    assert sorted(published(redis_client, writer.settings)) == [1, 2, 3, 40, 41, 42]
    assert two_phase.published_marks(redis_client, writer.settings.identity) == {
        "a": entry_id(42),
        "b": entry_id(3),
    }


def test_a_plan_the_driver_left_is_finished_before_the_tasks_publish(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """A run publishing from the driver died mid-commit; the next run publishes from its
    tasks: the plan is finished when it starts, then its re-cut batch adds the rest."""
    settings = settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="15")
    messages = stage(settings, monkeypatch, "7", [rows(list(range(0, 40)))])
    staged = [(m.staging, m.rows) for m in messages if m.staging]

    die_after_first_step(redis_client, settings, "7", staged)
    assert len(published(redis_client, settings)) == 15
    writer = start(redis_server, tmp_path, stream="out", maxRowsPerCommit="15")
    assert sorted(published(redis_client, settings)) == list(range(40))  # finished at start
    batch_of(writer, monkeypatch, 7, [rows(list(range(0, 60)))])
    assert sorted(published(redis_client, settings)) == list(range(60))
    assert leftovers(redis_client) == []


def test_the_driver_refuses_spans_a_run_from_the_tasks_left(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    writer = start(redis_server, tmp_path, stream="out")
    task(writer, monkeypatch, 0, 0, rows(list(range(10))))  # no commit: the run died
    with pytest.raises(ValueError, match="left 1 spans of published rows"):
        start(redis_server, tmp_path, stream="out", publishFrom="driver")
    # Once a run from the tasks commits a batch past them, the driver may take over.
    batch_of(start(redis_server, tmp_path, stream="out"), monkeypatch, 0, [rows(list(range(20)))])
    assert from_tasks.unsettled(redis_client, writer.settings.identity) == 0
    start(redis_server, tmp_path, stream="out", publishFrom="driver")
    assert sorted(published(redis_client, writer.settings)) == list(range(20))


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"publishFrom": "executors"}, 'must be "driver" or "tasks", got \'executors\''),
        ({"publishFrom": "tasks", "sourceIdColumn": ""}, "needs option sourceIdColumn"),
        ({"publishFrom": "tasks", "atomicCommit": "true"}, "exclude each other"),
    ],
)
def test_the_option_refuses_what_it_cannot_keep(
    options: dict[str, str], says: str, redis_server: Any, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        settings_of(redis_server, tmp_path, stream="out", **options)
