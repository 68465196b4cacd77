"""docs/writing-a-sink.md followed end to end: the toy sink written from it
(tests/spark/sink/file_sink.py) appends each record of a real redis-stream source once, with
the join run in its write, through a replay, a torn write and the profile's checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.sql import SparkSession

from enrich.spark import lookup_join, low_latency, register_data_sources
from enrich.spark.sink import sink_spi as spi
from enrich.spark.sink.joined import FORMAT_INFIX, register_joined
from enrich.spark.stages.pipeline import stage_of
from enrich.testing import FakeSource
from tests.spark.sink.file_sink import NAME, FileSink, committed_rows, partition_file

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SCHEMA = "stream_id string, order_id long"


@pytest.fixture
def spark_sources(spark: SparkSession) -> SparkSession:
    register_data_sources(spark)
    spark.dataSource.register(FileSink)
    return spark


def orders(spark: SparkSession, url: str) -> Any:
    reader = spark.readStream.format("redis-stream").option("url", url).option("stream", "orders")
    # One task per source partition (the SPI's rule; the default splits a stream in two).
    return reader.option("partitionsPerStream", "1").schema(SCHEMA).load()


def enriched(spark: SparkSession, url: str) -> Any:
    users = FakeSource({i: (f"user-{i}",) for i in range(0, 100, 2)}, schema="name string")
    return lookup_join(orders(spark, url), users, on="order_id", how="left", name="users")


def run(writer: Any, folder: Path, checkpoint: Path) -> None:
    query = writer.option("path", str(folder)).option("checkpointLocation", str(checkpoint))
    started = query.start()
    try:
        started.processAllAvailable()
    finally:
        started.stop()


def test_each_record_is_appended_once_with_the_join_run_in_the_sink(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ids = [redis_client.xadd("orders", {"order_id": i}).decode() for i in range(40)]
    folder = tmp_path / "out"
    run(
        low_latency(enriched(spark_sources, redis_server.url), sink=FileSink, warm=False),
        folder,
        tmp_path / "chk-1",
    )
    rows = committed_rows(folder, spi.ONE_STREAM)
    assert [r["stream_id"] for r in rows] == ids
    assert [r["name"] for r in rows[:3]] == ["user-0", None, "user-2"]  # the join's column

    # A replay over the same records (a fresh checkpoint reads the stream from its start,
    # the batches cut otherwise) appends nothing; new records are appended once.
    ids += [redis_client.xadd("orders", {"order_id": i}).decode() for i in range(40, 50)]
    run(
        low_latency(enriched(spark_sources, redis_server.url), sink=FileSink, warm=False),
        folder,
        tmp_path / "chk-2",
    )
    assert [r["stream_id"] for r in committed_rows(folder, spi.ONE_STREAM)] == ids


def test_a_torn_write_is_cut_off_and_its_rows_written_once(
    spark_sources: SparkSession, redis_server: Any, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ids = [redis_client.xadd("orders", {"order_id": i}).decode() for i in range(10)]
    folder = tmp_path / "out"
    writer = orders(spark_sources, redis_server.url).writeStream.format(NAME)
    writer = writer.option(spi.ID_OPTION, spi.STREAM_ID).trigger(availableNow=True)
    run(writer, folder, tmp_path / "chk-1")
    ids += [redis_client.xadd("orders", {"order_id": i}).decode() for i in range(10, 15)]
    path = partition_file(folder, spi.ONE_STREAM)
    with open(path, "a") as handle:  # a crash in the middle of the next commit's write
        handle.write(f'{{"row": {{"stream_id": "{ids[10]}", "order_id": 10}}}}\n{{"row": ')
    run(writer, folder, tmp_path / "chk-2")
    assert [r["stream_id"] for r in committed_rows(folder, spi.ONE_STREAM)] == ids


def test_the_in_sink_join_is_registered_for_this_sink_and_the_source_checked(
    spark_sources: SparkSession, redis_server: Any, tmp_path: Path
) -> None:
    stage = stage_of(enriched(spark_sources, redis_server.url))
    assert stage is not None
    assert register_joined(spark_sources, FileSink, stage).startswith(f"{NAME}{FORMAT_INFIX}")
    dropped = orders(spark_sources, redis_server.url).drop("stream_id")
    writer = dropped.writeStream.format(NAME).option(spi.ID_OPTION, spi.STREAM_ID)
    with pytest.raises(Exception, match="names column 'stream_id', which the DataFrame"):
        run(writer.trigger(availableNow=True), tmp_path / "out", tmp_path / "chk")
