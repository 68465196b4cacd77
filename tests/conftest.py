"""Fixtures any test folder may use: real database servers on free loopback ports, the
embedded PostgreSQL (tests/support/postgres_fixtures), a MariaDB/MySQL
(tests/support/mysql_fixtures) and the toy key-value store of the connector guide
(tests/support/kv_fixtures)."""

from __future__ import annotations

from tests.support.kv_fixtures import kv_store  # noqa: F401 (pytest finds fixtures by name)
from tests.support.mysql_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    mysql_server,
    mysql_session_server,
    mysql_url,
    restartable_mysql,
    tls_mysql,
)
from tests.support.postgres_fixtures import (  # noqa: F401 (pytest finds fixtures by name)
    postgres_server,
    postgres_url,
    restartable_postgres,
)
