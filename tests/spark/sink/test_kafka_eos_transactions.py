"""One source partition's transaction on a real broker, without Spark: a replay writes
nothing twice, a producer kept from an earlier task that was fenced meanwhile gives way
and reads the marks again, and a restart aborts what a dead run left open."""

from __future__ import annotations

import json
import os
import uuid

import pyarrow as pa
import pytest

from enrich.demo.kafka_broker import KafkaBroker
from enrich.spark.sink.kafka_eos import marks, transaction
from enrich.spark.sink.kafka_eos.settings import KafkaSinkSettings
from enrich.spark.sink.kafka_eos.source import IdKind, SourceColumns, transactional_id
from tests.support.kafka_fixtures import create_topic
from tests.support.kafka_reading import read_all

pytestmark = [pytest.mark.timeout(180)]

COLUMNS = SourceColumns(partition=("topic", "partition"), id="offset", kind=IdKind.OFFSET)


def rows(offsets: range) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "topic": ["src"] * len(offsets),
            "partition": pa.array([0] * len(offsets), pa.int32()),
            "offset": pa.array(list(offsets), pa.int64()),
            "value": [json.dumps({"offset": o}) for o in offsets],
        }
    )


@pytest.fixture
def settings(kafka_broker: KafkaBroker, kafka_topic: str) -> KafkaSinkSettings:
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=2)
    made = KafkaSinkSettings.of(
        {
            "kafka.bootstrap.servers": kafka_broker.bootstrap,
            "topic": kafka_topic,
            "sinkName": uuid.uuid4().hex,
            "marksTopic": f"{kafka_topic}-marks",
            "marksPartitions": "2",
        }
    )
    marks.ensure_topic(made)
    return made


def written(settings: KafkaSinkSettings) -> list[int]:
    return sorted(json.loads(v)["offset"] for v in read_all(settings.bootstrap, settings.topic))


def test_a_replay_and_a_re_cut_write_nothing_twice(settings: KafkaSinkSettings) -> None:
    first = transaction.write_source(settings, COLUMNS, "src/0", [rows(range(0, 10))], 0)
    assert (first.committed, first.records, first.skipped) == (1, 10, 0)
    replay = transaction.write_source(settings, COLUMNS, "src/0", [rows(range(0, 10))], 0)
    assert (replay.committed, replay.records, replay.skipped) == (0, 0, 10)
    transaction._kept.clear()  # another process: a new producer, the marks read back
    re_cut = transaction.write_source(settings, COLUMNS, "src/0", [rows(range(5, 25))], 1)
    assert (re_cut.records, re_cut.skipped) == (15, 5)
    assert written(settings) == list(range(25))


def test_a_kept_producer_fenced_meanwhile_gives_way(settings: KafkaSinkSettings) -> None:
    """Process X wrote batch 0 and kept its producer; process Y took the source partition
    (its init fenced X's producer) and wrote batch 1. Batch 1 replayed in X: its kept
    producer, with the old mark, is fenced at commit; a new one reads Y's mark, skips."""
    transaction.write_source(settings, COLUMNS, "src/0", [rows(range(0, 10))], 0)
    key = (os.getpid(), transactional_id(settings.id_prefix, settings.identity, "src/0"))
    stale = transaction._kept.pop(key)  # X's producer, mark 9
    y = transaction.write_source(settings, COLUMNS, "src/0", [rows(range(0, 20))], 1)
    assert (y.records, y.skipped) == (10, 10)
    transaction._kept[key] = stale  # back in X
    again = transaction.write_source(settings, COLUMNS, "src/0", [rows(range(0, 20))], 1)
    assert (again.fenced, again.committed, again.records, again.skipped) == (1, 0, 0, 20)
    assert written(settings) == list(range(20))


def test_a_restart_aborts_what_a_dead_run_left_open(settings: KafkaSinkSettings) -> None:
    """A dead run's transaction is open (its records in the log, uncommitted): a
    read_committed consumer stops before them (the last stable offset), and the next
    producer of the transactional id aborts them on init, then writes the rows once."""
    from confluent_kafka import Producer

    txn_id = transactional_id(settings.id_prefix, settings.identity, "src/0")
    dead = Producer(settings.producer_config(txn_id))
    dead.init_transactions(60)
    dead.begin_transaction()
    for o in range(0, 8):
        dead.produce(settings.topic, json.dumps({"offset": o}).encode(), partition=0)
    assert dead.flush(30) == 0
    uncommitted = read_all(settings.bootstrap, settings.topic, committed=False)
    assert len(uncommitted) == 8 and written(settings) == []
    counts = transaction.write_source(settings, COLUMNS, "src/0", [rows(range(0, 8))], 0)
    assert counts.records == 8
    assert written(settings) == list(range(8))  # the dead run's 8 aborted, not counted
    assert len(read_all(settings.bootstrap, settings.topic, committed=False)) == 16
