"""Fixtures of the store-protection tests: a real Redis, the demo service under load."""

from __future__ import annotations

from tests.support.demo_service import StartService, service
from tests.support.redis_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    redis_client,
    redis_server,
)

__all__ = ("StartService", "service")
