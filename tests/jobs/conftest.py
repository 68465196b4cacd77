"""The example jobs run on the Spark tests' shared session and real servers."""

from __future__ import annotations

from tests.spark.conftest import spark
from tests.support.redis_fixtures import redis_client, redis_server

__all__ = ("redis_client", "redis_server", "spark")
