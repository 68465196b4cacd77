"""The ``kafka-alo`` sink on local Spark and a real broker: every record arrives with
its key, value, headers and partition (binary and string values, a null value), a
missing or mistyped column fails the query naming it, and under
``low_latency(df, sink="kafka")`` a kafka -> lookup_join -> kafka query runs the join in
the sink's write (no ``mapInArrow`` stage left) and writes each record joined, once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from enrich.demo.kafka_broker import KafkaBroker
from enrich.spark import low_latency, register_data_sources
from tests.support.kafka_fixtures import consume_messages, create_topic, produce
from tests.support.spark_version import requires_spark

pytestmark = [
    pytest.mark.spark,
    pytest.mark.timeout(300),
    requires_spark(4, 2, "Spark's Kafka connector jars (4.2.0) and the Arrow stream writer"),
]

Found = tuple[int, Any, Any, list[tuple[str, bytes]] | None]  # partition, key, value, headers


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    return spark


def read_records(bootstrap: str, topic: str, expected: int) -> list[Found]:
    """``topic``'s records from its start, once ``expected`` came (or a minute)."""
    found = consume_messages(bootstrap, topic, expected)
    return [(m.partition(), m.key(), m.value(), m.headers()) for m in found]


def test_a_batch_write_round_trips_every_column(
    spark_sources: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    """Binary values with keys, headers and partitions chosen per row, the topic from the
    rows' column; then string values to the topic option (which wins over the column),
    one of them null."""
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=3)
    rows = [
        (f"k{i}", f"v{i}".encode(), kafka_topic, i % 3, [(f"h{i}", b"x")] if i % 2 else None)
        for i in range(30)
    ]
    schema = "key string, value binary, topic string, partition int, " \
             "headers array<struct<key: string, value: binary>>"  # fmt: skip
    df = spark_sources.createDataFrame(rows, schema)
    df.write.format("kafka-alo").mode("append").option(
        "kafka.bootstrap.servers", kafka_broker.bootstrap
    ).save()
    strings = spark_sources.createDataFrame(
        [("a", "one", "elsewhere"), (None, None, "elsewhere")],
        "key string, value string, topic string",
    )
    strings.write.format("kafka-alo").mode("append").option(
        "kafka.bootstrap.servers", kafka_broker.bootstrap
    ).option("topic", kafka_topic).save()

    found = read_records(kafka_broker.bootstrap, kafka_topic, 32)
    assert len(found) == 32
    binary = [f for f in found if f[2] is not None and f[2].startswith(b"v")]
    assert sorted(binary, key=repr) == sorted(
        [(i % 3, f"k{i}".encode(), f"v{i}".encode(), [(f"h{i}", b"x")] if i % 2 else None)
         for i in range(30)], key=repr)  # fmt: skip
    others = {(f[1], f[2]) for f in found if f[2] is None or not f[2].startswith(b"v")}
    assert others == {(None, None), (b"a", b"one")}  # a null value is a record too


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (["CAST(id AS STRING) AS key"], r"writes column 'value' .* no such column \(columns: key"),
        (["id AS value"], r"reads column 'value' as each record's value .* got bigint"),
        (["'v' AS value", "1.5 AS key"], r"column 'key' .* got decimal"),
    ],
    ids=["no value", "a bigint value", "a decimal key"],
)
def test_a_missing_or_mistyped_column_fails_the_write_naming_it(
    spark_sources: SparkSession, kafka_broker: KafkaBroker, select: list[str], message: str
) -> None:
    df = spark_sources.range(3).selectExpr(*select)
    with pytest.raises(Exception, match=message):
        df.write.format("kafka-alo").mode("append").option(
            "kafka.bootstrap.servers", kafka_broker.bootstrap
        ).option("topic", "never").save()


def test_kafka_to_kafka_under_the_profile_runs_the_join_in_the_sink(
    spark_sources: SparkSession,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    redis_server: Any,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    """kafka (2 partitions) -> lookup_join (Redis) -> kafka-alo, ``low_latency(df,
    sink="kafka")``: the join runs in the sink's write (no mapInArrow stage), every
    record comes out once, joined (a left join keeps the misses, unjoined), its key
    kept, its value the JSON of the columns ``valueColumns`` names."""
    from connectors.redis import RedisLookup
    from enrich.spark import lookup_join, statistics

    url = redis_server.url
    for user in range(0, 200, 2):  # odd ids miss
        redis_client.hset(f"user:{user}", mapping={"name": f"n{user}"})
    out = f"{kafka_topic}-out"
    create_topic(kafka_broker.bootstrap, kafka_topic, partitions=2)
    create_topic(kafka_broker.bootstrap, out, partitions=2)
    produce(kafka_broker.bootstrap, kafka_topic, [str(i).encode() for i in range(200)])
    source = (
        spark_sources.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", kafka_topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(CAST(value AS STRING) AS BIGINT) AS order_id", "value AS key")
    )
    users = RedisLookup(url, key_template="user:{}", value="hash", schema="name string")
    joined = lookup_join(source, users, on="order_id", name="alo_users")
    query = (
        low_latency(joined, sink="kafka", warm=False)
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("topic", out)
        .option("valueColumns", "order_id,name")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        query.processAllAvailable()
        plan = str(query._jsq.streamingQuery().lastExecution().executedPlan().toString())
    finally:
        query.stop()
    assert "MapInArrow" not in plan, plan
    found = read_records(kafka_broker.bootstrap, out, 200)
    values = [json.loads(value) for _, _, value, _ in found]
    assert sorted(v["order_id"] for v in values) == list(range(200))  # none lost, none twice
    by_order = {v["order_id"]: v for v in values}
    assert by_order[8] == {"order_id": 8, "name": "n8"} and by_order[9]["name"] is None
    assert all(int(key) == json.loads(value)["order_id"] for _, key, value, _ in found)
    assert statistics("alo_users").rows_in == 200
