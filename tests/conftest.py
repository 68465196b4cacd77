"""Fixtures any test folder may use: the embedded PostgreSQL (tests/support/postgres_fixtures)."""

from __future__ import annotations

from tests.support.postgres_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    postgres_server,
    postgres_url,
    restartable_postgres,
)
