"""The example jobs run on the Spark tests' shared session and real servers."""

from __future__ import annotations

from tests.spark.conftest import spark
from tests.support.kafka_fixtures import kafka_broker, kafka_topic
from tests.support.redis_fixtures import redis_client, redis_server

__all__ = ("kafka_broker", "kafka_topic", "redis_client", "redis_server", "spark")
