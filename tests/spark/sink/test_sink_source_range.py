"""A staging list whose rows are of one source stream in entry-id order, its first id
after the stream's mark, is published without each row's check
(:mod:`enrich.spark.sink.redis.source_range`); anything else is checked row by row, and
either way each source entry goes out once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import redis
from pyspark.sql import Row

from enrich.spark.sink.redis import two_phase
from enrich.spark.sink.redis.data_source import RedisStreamWriter
from enrich.spark.sink.redis.source_range import SourceRange
from enrich.spark.sink.sink_spi import SourceFields
from tests.spark.sink import test_sink_by_source as by_source
from tests.spark.sink.test_sink_by_kafka_source import records

pytestmark = [pytest.mark.timeout(120)]

NAMES = list(by_source.ARROW.names)
ONE = SourceFields("stream_id")
BY_KEY = SourceFields("stream_id", "stream_key")
KAFKA = SourceFields("offset", "topic,partition")


def summary(source: SourceFields, names: list[str], *items: Any) -> Any:
    ranges = SourceRange(source, names)
    assert list(ranges.follow(iter(items))) == list(items)  # passed on as they are
    text = ranges.summary()
    return json.loads(text) if text else None


def test_one_stream_in_order_is_summed_up_by_its_first_id() -> None:
    # entry ids compare as numbers: 9-0 < 10-0 and 1-9 < 1-10, not as text
    batch = pa.RecordBatch.from_pydict(
        {
            "stream_id": ["9-0", "10-0", "10-9", "10-10", "10-10"],
            "stream_key": ["a"] * 5,
            "order_id": [1, 2, 3, 4, 5],
            "enrich_error": [None] * 5,
        },
        schema=by_source.ARROW,
    )
    assert summary(ONE, NAMES, batch) == ["*", "9-0"]
    assert summary(BY_KEY, NAMES, batch.slice(0, 2), batch.slice(2)) == ["a", "9-0"]
    assert summary(ONE, NAMES, batch.slice(0, 0), batch) == ["*", "9-0"]
    kafka = records(3, range(8, 12))
    assert summary(KAFKA, kafka.schema.names, kafka) == ["orders/3", "8"]


def test_anything_else_has_no_summary() -> None:
    assert summary(ONE, NAMES) is None  # nothing staged
    down = by_source.rows([5, 4])
    assert summary(ONE, NAMES, down) is None
    assert (
        summary(ONE, NAMES, by_source.rows([4, 5]), by_source.rows([3])) is None
    )  # down across batches
    assert summary(BY_KEY, NAMES, by_source.rows([1], "a"), by_source.rows([2], "b")) is None
    two = pa.concat_batches([by_source.rows([1], "a"), by_source.rows([2], "b")])
    assert summary(BY_KEY, NAMES, two) is None
    assert summary(ONE, NAMES, by_source.rows([1]), Row(stream_id="9-0")) is None
    huge = pa.RecordBatch.from_pydict(
        {
            "stream_id": ["99999999999999999999999-0"],
            "stream_key": ["a"],
            "order_id": [1],
            "enrich_error": [None],
        },
        schema=by_source.ARROW,
    )
    assert summary(ONE, NAMES, huge) is None
    kafka = pa.concat_batches([records(0, range(3)), records(1, range(3))])
    assert summary(KAFKA, kafka.schema.names, kafka) is None


def commit(
    client: redis.Redis, settings: Any, batch: str, messages: list[Any], **options: Any
) -> two_phase.Published:
    staged = [(m.staging, m.rows) for m in messages if m.staging]
    ranges = [m.source_range for m in messages if m.staging]
    return two_phase.commit(
        client,
        settings.identity,
        batch,
        staged,
        marked=True,
        step=15,
        source=settings.source,
        ranges=ranges,
        **options,
    )


def test_lists_after_their_marks_go_unchecked_a_replay_is_checked(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = by_source.settings_of(
        redis_server, tmp_path, stream="out", sourceStreamColumn="stream_key"
    )
    first = by_source.stage(
        settings,
        monkeypatch,
        "0",
        [by_source.rows(list(range(0, 40)), "a"), by_source.rows(list(range(0, 30)), "b")],
    )
    done = commit(redis_client, settings, "0", first)
    assert (done.rows, done.unchecked, done.replayed) == (70, 70, 0)
    # Re-cut: a's list starts below its mark (checked row by row, 30 skipped), b's
    # after it (unchecked), and a list of both streams has no range (checked).
    both = pa.concat_batches(
        [by_source.rows(list(range(60, 65)), "a"), by_source.rows(list(range(50, 55)), "b")]
    )
    again = by_source.stage(
        settings,
        monkeypatch,
        "0",
        [by_source.rows(list(range(10, 60)), "a"), by_source.rows(list(range(30, 50)), "b"), both],
    )
    done = commit(redis_client, settings, "0", again)
    assert (done.rows, done.unchecked, done.replayed) == (50, 20, 30)
    ids = by_source.published(redis_client, settings)
    assert sorted(ids) == sorted([*range(65), *range(55)])  # none lost, none twice
    marks = two_phase.published_marks(redis_client, settings.identity)
    assert marks == {"a": by_source.entry_id(64), "b": by_source.entry_id(54)}
    assert by_source.leftovers(redis_client) == []


def test_an_unchecked_plan_cut_between_steps_resumes_and_closes_at_its_last_row(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """The driver dies after the first step (15 rows) of an unchecked list: the plan's
    trace says how far it went, so closing the lost plan raises the mark to its 15th
    row, and the re-cut replay publishes the rest once."""
    settings = by_source.settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="15")
    messages = by_source.stage(settings, monkeypatch, "7", [by_source.rows(list(range(0, 40)))])
    staged = [(m.staging, m.rows) for m in messages if m.staging]
    ranges = [m.source_range for m in messages if m.staging]
    assert ranges == [json.dumps(["*", by_source.entry_id(0)])]
    by_source.die_after_first_step(redis_client, settings, "7", staged, plan_ttl=60, ranges=ranges)
    assert sorted(by_source.published(redis_client, settings)) == list(range(15))
    redis_client.delete(two_phase.plan_key(settings.identity), *(s for s, _ in staged))
    closing = by_source.settings_of(
        redis_server, tmp_path, stream="out", maxRowsPerCommit="15", closeLostPlan="true"
    )
    replay = by_source.stage(settings, monkeypatch, "3", [by_source.rows(list(range(0, 60)))])
    RedisStreamWriter(closing, by_source.SCHEMA, None).commit(replay, 3)
    assert sorted(by_source.published(redis_client, settings)) == list(range(60))  # none twice
    assert two_phase.published_marks(redis_client, settings.identity) == {
        "*": by_source.entry_id(59)
    }


def test_a_resumed_unchecked_plan_follows_its_own_ranges(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """A plan cut after its first step is finished by the next commit (its ranges kept
    in the plan), then the re-cut batch's own lists are checked against the new marks."""
    settings = by_source.settings_of(redis_server, tmp_path, stream="out", maxRowsPerCommit="15")
    messages = by_source.stage(
        settings,
        monkeypatch,
        "7",
        [by_source.rows(list(range(0, 40))), by_source.rows(list(range(40, 70)))],
    )
    staged = [(m.staging, m.rows) for m in messages if m.staging]
    ranges = [m.source_range for m in messages if m.staging]
    by_source.die_after_first_step(redis_client, settings, "7", staged, ranges=ranges)
    replay = by_source.stage(
        settings,
        monkeypatch,
        "6",
        [by_source.rows(list(range(0, 50))), by_source.rows(list(range(50, 90)))],
    )
    done = commit(redis_client, settings, "6", replay)
    assert done.resumed
    assert (done.rows, done.replayed) == (75, 70)  # 15..69 by batch 7's plan, then 70..89
    assert done.unchecked == 55  # batch 7's rest; batch 6's second list starts below
    assert sorted(by_source.published(redis_client, settings)) == list(range(90))
    assert by_source.leftovers(redis_client) == []
