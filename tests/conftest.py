"""Fixtures every test folder may use: real database servers started on free ports."""

from __future__ import annotations

from tests.support.mysql_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    mysql_server,
    mysql_session_server,
    mysql_url,
)
