"""Fixtures of the store-protection tests: real Redis servers, the demo service under
load, and the HTTP test service that counts what arrives."""

from __future__ import annotations

from tests.support.demo_service import StartService, service
from tests.support.http_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    http_server,
    http_server_session,
)
from tests.support.redis_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    redis_client,
    redis_server,
    restartable_redis,
)

__all__ = ("StartService", "service")
