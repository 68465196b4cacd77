"""Registration of the Redis data sources ("redis-stream" source, "redis" sink)."""

from __future__ import annotations

from typing import Any

import pyspark

# The Python Data Source API is 4.0+; the sink writes Arrow batches
# (DataSourceStreamArrowWriter), which pyspark has since 4.1.
NEEDED = (4, 1)


def _version(text: str) -> tuple[int, int]:
    major, minor = [*text.split("."), "0"][:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def register_data_sources(spark: Any) -> None:
    """Register the formats ``"redis-stream"`` (a replayable source), ``"redis"``
    (an idempotent or transactional sink) and ``"kafka-eos"`` (a sink writing to Kafka
    exactly once, keyed by the source record: :mod:`enrich.spark.sink.kafka_eos`) and
    ``"kafka-alo"`` (Kafka at least once, Spark's Kafka sink's options, a query's joins
    run in its write: :mod:`enrich.spark.sink.kafka`) with ``spark``; the Kafka sinks
    need confluent-kafka when a query uses them. What the source's tasks count
    (malformed, dropped, lost entries) adds up in this process:
    :func:`enrich.spark.stream_statistics`.

    Raises:
        RuntimeError: pyspark is older than 4.1: 3.5 has no Python Data Source API, 4.0
            no Arrow stream writer (the sink's).
    """
    if _version(pyspark.__version__) < NEEDED:
        raise RuntimeError(
            f"the Redis data sources need Spark 4.1 or newer (Python Data Source API, "
            f"Arrow stream writers); this is pyspark {pyspark.__version__}"
        )
    from ..sink.kafka.alo_sink import KafkaAloSink
    from ..sink.kafka_eos.eos_sink import counted_sink
    from ..sink.redis.data_source import RedisSinkDataSource
    from ..streams.stream_source import counted_source

    spark.dataSource.register(counted_source(spark))
    spark.dataSource.register(RedisSinkDataSource)
    spark.dataSource.register(counted_sink(spark))
    spark.dataSource.register(KafkaAloSink)
