"""The sink keyed by a Kafka record (``sourceIdColumn=offset``,
``sourceStreamColumn=topic,partition``): a mark per (topic, partition), the offset as the
rising id, so batches re-cut on a replay neither lose nor double a record, in every
target form (stream, hash, JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
import redis
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from enrich.spark.sink.redis import two_phase
from enrich.spark.sink.redis.data_source import RedisStreamWriter, StagedPart
from enrich.spark.sink.redis.row_writes import SinkSettings
from tests.spark.sink.test_sink_by_source import TARGETS, leftovers, published
from tests.spark.sink.test_sink_commit import _Task

pytestmark = [pytest.mark.timeout(120)]

SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("order_id", LongType()),
        StructField("enrich_error", StringType()),
    ]
)
ARROW = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
     ("order_id", pa.int64()), ("enrich_error", pa.string())]
)  # fmt: skip
KEYED = {"sourceIdColumn": "offset", "sourceStreamColumn": "topic,partition"}


def settings_of(server: Any, tmp_path: Path, **options: str) -> SinkSettings:
    base = {"url": server.url, "checkpointLocation": str(tmp_path / "ck"), **KEYED}
    return SinkSettings.of({**base, **options})


def records(partition: int, offsets: range, failed: int = 0) -> pa.RecordBatch:
    """Records of topic ``orders``: order ids are ``partition * 1000 + offset``."""
    ids = [partition * 1000 + o for o in offsets]
    return pa.RecordBatch.from_pydict(
        {
            "topic": ["orders"] * len(ids),
            "partition": [partition] * len(ids),
            "offset": list(offsets),
            "order_id": ids,
            "enrich_error": [f"e{i}" if failed and i % failed == 0 else None for i in ids],
        },
        schema=ARROW,
    )


def run_batch(settings: SinkSettings, monkeypatch: Any, batch: int,
              parts: list[pa.RecordBatch]) -> None:  # fmt: skip
    messages: list[StagedPart] = []
    for n, part in enumerate(parts):
        task = _Task(n, n, str(batch))
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda t=task: t))
        messages.append(RedisStreamWriter(settings, SCHEMA, None).write(iter([part])))
    RedisStreamWriter(settings, SCHEMA, None).commit(messages, batch)


@pytest.mark.parametrize("target", list(TARGETS))
def test_kafka_batches_re_cut_on_a_replay_publish_each_record_once(
    target: str, redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    """Two partitions whose offsets cross digit counts (9 < 10 < 100); the replays re-cut
    the ranges per partition, come back with old batch ids, and cross partitions."""
    settings = settings_of(redis_server, tmp_path, **TARGETS[target])
    failed = 7 if target == "dead letter" else 0
    run_batch(settings, monkeypatch, 0, [records(0, range(0, 8), failed),
                                         records(1, range(0, 95), failed)])  # fmt: skip
    run_batch(settings, monkeypatch, 0, [records(0, range(0, 30), failed),
                                         records(1, range(90, 120), failed)])  # fmt: skip
    run_batch(settings, monkeypatch, 4, [records(1, range(100, 130), failed)])
    run_batch(settings, monkeypatch, 1, [records(0, range(25, 40), failed),
                                         records(1, range(0, 130), failed)])  # fmt: skip
    expected = sorted([o for o in range(40)] + [1000 + o for o in range(130)])
    assert sorted(published(redis_client, settings)) == expected  # none lost, none twice
    marks = two_phase.published_marks(redis_client, settings.identity)
    assert marks == {"orders/0": "39", "orders/1": "129"}
    assert leftovers(redis_client) == []


def test_a_kafka_record_without_its_partition_fails_its_task_naming_it(
    redis_server: Any, redis_client: redis.Redis, tmp_path: Path, monkeypatch: Any
) -> None:
    settings = settings_of(redis_server, tmp_path, stream="out")
    bad = pa.RecordBatch.from_pydict(
        {"topic": ["orders"], "partition": [None], "offset": [3], "order_id": [41],
         "enrich_error": [None]}, schema=ARROW)  # fmt: skip
    with pytest.raises(ValueError, match=r"column 'partition' .sourceStreamColumn. is null"):
        run_batch(settings, monkeypatch, 0, [bad])
    negative = records(0, range(0, 1)).set_column(2, "offset", pa.array([-1], pa.int64()))
    with pytest.raises(ValueError, match="holds -1, not an entry id"):
        run_batch(settings, monkeypatch, 0, [negative])
    assert redis_client.xlen("out") == 0


def test_the_stream_columns_are_checked_as_options(redis_server: Any, tmp_path: Path) -> None:
    base = {"url": redis_server.url, "stream": "out", "checkpointLocation": str(tmp_path)}
    with pytest.raises(ValueError, match="name the same column 'offset'"):
        SinkSettings.of({**base, "sourceIdColumn": "offset", "sourceStreamColumn": "topic,offset"})
    with pytest.raises(ValueError, match="names a column twice"):
        SinkSettings.of({**base, "sourceIdColumn": "offset", "sourceStreamColumn": "topic,topic"})
    settings = SinkSettings.of({**base, "sourceIdColumn": "offset",
                                "sourceStreamColumn": " topic , partition "})  # fmt: skip
    assert settings.source == two_phase.SourceFields("offset", "topic,partition")
