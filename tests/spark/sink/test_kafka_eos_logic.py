"""The kafka-eos sink's pure parts: options, source partitions, marks, transactional ids
(no broker, no Spark session)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from enrich.spark.sink.kafka_eos import MissingOption, SourceNotKeyed
from enrich.spark.sink.kafka_eos.eos_errors import KafkaSinkRefused
from enrich.spark.sink.kafka_eos.settings import KafkaSinkSettings, client_config
from enrich.spark.sink.kafka_eos.source import (
    IdKind,
    SourceColumns,
    decode_mark,
    encode_mark,
    higher,
    mark_key,
    mark_partition,
    resolve,
    split,
    transactional_id,
    unwritten,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out", "checkpointLocation": "/ck"}
KAFKA = SourceColumns(partition=("topic", "partition"), id="offset", kind=IdKind.OFFSET)
STREAMS = SourceColumns(partition=("stream_key",), id="stream_id", kind=IdKind.ENTRY_ID)


def kafka_rows(rows: list[tuple[str, int, int]]) -> pa.RecordBatch:
    topics, partitions, offsets = zip(*rows, strict=True)
    return pa.RecordBatch.from_pydict(
        {
            "topic": list(topics),
            "partition": pa.array(partitions, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "value": [f"v{o}" for o in offsets],
        }
    )


def test_missing_options_are_named() -> None:
    for missing, option in (
        ("kafka.bootstrap.servers", "kafka.bootstrap.servers"),
        ("topic", "topic"),
        ("checkpointLocation", "checkpointLocation"),
    ):
        with pytest.raises(MissingOption, match=option) as caught:
            KafkaSinkSettings.of({k: v for k, v in BASE.items() if k != missing})
        assert caught.value.option == option
    named = KafkaSinkSettings.of({**{k: v for k, v in BASE.items() if k != "checkpointLocation"},
                                  "sinkName": "orders"})  # fmt: skip
    assert named.identity != KafkaSinkSettings.of(BASE).identity
    with pytest.raises(ValueError, match="needs option sourceIdColumn"):
        KafkaSinkSettings.of({**BASE, "sourceStreamColumn": "topic,partition"})
    with pytest.raises(ValueError, match="marksTopic name the same topic"):
        KafkaSinkSettings.of({**BASE, "marksTopic": "out"})


def test_options_are_read_whatever_their_case() -> None:
    lowered = {k.lower(): v for k, v in BASE.items()}
    settings = KafkaSinkSettings.of({**lowered, "valuecolumn": "body"})
    assert settings.identity == KafkaSinkSettings.of(BASE).identity
    assert settings.value_column == "body"


def test_secrets_never_show() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="s3cr3t-pw";'
    )
    settings = KafkaSinkSettings.of({**BASE, "kafka.sasl.jaas.config": jaas,
                                     "kafka.ssl.key.password": "k3y-pw"})  # fmt: skip
    assert settings.client["sasl.username"] == "alice"
    assert settings.client["sasl.password"] == "s3cr3t-pw"
    assert "sasl.jaas.config" not in settings.client
    shown = repr(settings) + str(settings)
    assert "s3cr3t-pw" not in shown and "k3y-pw" not in shown and "***" in shown
    with pytest.raises(KafkaSinkRefused) as caught:
        client_config({"kafka.sasl.jaas.config": 'x required password="only-pw";'})
    assert "only-pw" not in str(caught.value)


def test_the_source_columns_are_found_or_refused() -> None:
    settings = KafkaSinkSettings.of(BASE)
    kafka = {"topic": "string", "partition": "int", "offset": "bigint", "value": "string"}
    assert resolve(settings, kafka) == KAFKA
    streams = {"stream_key": "string", "stream_id": "string", "value": "string"}
    assert resolve(settings, streams) == STREAMS
    one = resolve(settings, {"stream_id": "string", "value": "string"})
    assert one.partition == () and one.kind is IdKind.ENTRY_ID
    with pytest.raises(SourceNotKeyed, match="these rows have value"):
        resolve(settings, {"value": "string"})
    with pytest.raises(SourceNotKeyed, match="got double"):
        resolve(settings, {**kafka, "offset": "double"})
    named = KafkaSinkSettings.of({**BASE, "sourceIdColumn": "pos", "sourceStreamColumn": "t, p"})
    assert resolve(named, {"t": "string", "p": "int", "pos": "bigint", "value": "string"}) == (
        SourceColumns(partition=("t", "p"), id="pos", kind=IdKind.OFFSET)
    )
    with pytest.raises(SourceNotKeyed, match="names column 'p', which the DataFrame does not have"):
        resolve(named, {"t": "string", "pos": "bigint", "value": "string"})


def test_rows_split_by_source_partition_in_order() -> None:
    batch = kafka_rows([("a", 0, 5), ("a", 1, 7), ("a", 0, 6), ("b", 0, 1)])
    parts = split(batch, KAFKA)
    assert sorted(parts) == ["a/0", "a/1", "b/0"]
    assert parts["a/0"].column("offset").to_pylist() == [5, 6]
    nulls = batch.set_column(1, "partition", pa.array([0, None, 0, 0], pa.int32()))
    with pytest.raises(SourceNotKeyed, match=r"column 'partition' \(sourceStreamColumn\) is null"):
        split(nulls, KAFKA)


def test_rows_at_or_below_the_mark_are_left_out() -> None:
    batch = kafka_rows([("a", 0, o) for o in (3, 4, 9, 10, 100)])
    kept, top = unwritten(batch, KAFKA, None)
    assert len(kept) == 5 and top == 100
    kept, top = unwritten(batch, KAFKA, 9)
    assert kept.column("offset").to_pylist() == [10, 100] and top == 100
    kept, top = unwritten(batch, KAFKA, 100)
    assert len(kept) == 0 and top is None


def test_entry_ids_compare_as_pairs_not_text() -> None:
    ids = ["9-5", "10-0", "10-2", "100-1"]
    batch = pa.RecordBatch.from_pydict({"stream_key": ["s"] * 4, "stream_id": ids})
    kept, top = unwritten(batch, STREAMS, (10, 0))
    assert kept.column("stream_id").to_pylist() == ["10-2", "100-1"] and top == (100, 1)
    kept, top = unwritten(batch, STREAMS, (9, 6))
    assert len(kept) == 3
    bad = pa.RecordBatch.from_pydict({"stream_key": ["s"], "stream_id": ["01-1"]})
    with pytest.raises(SourceNotKeyed, match="not an entry id"):
        split(bad, STREAMS)


def test_marks_round_trip_and_order() -> None:
    assert decode_mark(encode_mark(42, 3)) == 42
    assert decode_mark(encode_mark((1718000000000, 7), "3")) == (1718000000000, 7)
    assert decode_mark(None) is None
    assert higher(None, 3) == 3 and higher(5, 3) == 5 and higher((2, 0), (1, 9)) == (2, 0)


def test_transactional_ids_are_stable_per_sink_and_source_partition() -> None:
    one = transactional_id("enrich-eos", "abc", "orders/0")
    assert one == transactional_id("enrich-eos", "abc", "orders/0")  # any attempt, any run
    assert one != transactional_id("enrich-eos", "abc", "orders/1")
    assert one != transactional_id("enrich-eos", "abd", "orders/0")
    long = transactional_id("enrich-eos", "abc", "s" * 500)
    assert len(long) <= 200 and long != transactional_id("enrich-eos", "abc", "s" * 499)
    key = mark_key("abc", "orders/0")
    assert mark_partition(key, 5) == mark_partition(key, 5) < 5


def test_the_low_latency_profile_names_the_sinks_it_takes() -> None:
    from enrich.spark import ProfileRefused, low_latency

    with pytest.raises(ProfileRefused, match='"redis", "kafka" or "kafka-eos", not \'kafak\''):
        low_latency(object(), sink="kafak")
