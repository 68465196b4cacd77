"""The demo's users dimension in PostgreSQL: ``enrich demo --store postgres``.

:func:`demo_postgres` starts a throwaway server (:class:`PostgresServer`, Debian's
binaries in a folder of its own) and loads the same users the Redis store holds into a
``demo_users`` table; :func:`users_lookup` is the demo's lookup of it. Nothing here
replaces the default: without ``--store postgres`` the demo runs on Redis as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .dimension_service import TIERS
from .local import DEMO_USERS, Announce
from .postgres_server import PostgresServer

if TYPE_CHECKING:
    from connectors.postgres import PostgresLookup
    from connectors.redis import RedisLookup

TABLE = "demo_users"
USERS_SCHEMA = "name string, tier string"

# The rows enrich.demo.dimension_service.user() describes, made by the server itself
# (one statement, no client-side loop); ARRAY[...] is 1-based, hence the + 1.
_TIERS_SQL = ", ".join(f"'{tier}'" for tier in TIERS)
LOAD_SQL = f"""
DROP TABLE IF EXISTS {TABLE};
CREATE TABLE {TABLE} (id bigint PRIMARY KEY, name text, tier text, credit double precision);
INSERT INTO {TABLE}
SELECT i, 'user-' || i, (ARRAY[{_TIERS_SQL}])[i % {len(TIERS)} + 1], round(i * 0.5, 2)
FROM generate_series(0, {DEMO_USERS - 1}) AS i;
"""


@contextlib.contextmanager
def demo_postgres(announce: Announce | None = None) -> Iterator[str]:
    """A private PostgreSQL server holding ``demo_users`` (ids 0..DEMO_USERS-1); yields
    its URL. The server is stopped and its folder removed when the block is left.

    Raises:
        PostgresUnavailable: no PostgreSQL binaries, or the server did not start (the
            message says which in its first line).
    """
    server = PostgresServer()
    with server:
        server.sql(LOAD_SQL)
        if announce is not None:
            announce(
                f"started PostgreSQL: {server.bindir}/postgres, port {server.port}, "
                f"table {TABLE} ({DEMO_USERS:,} users)"
            )
        yield server.url


def users_lookup(url: str) -> PostgresLookup:
    """The demo's users store on PostgreSQL: the ``demo_users`` table keyed by ``id``."""
    from connectors.postgres import PostgresLookup

    return PostgresLookup(url, table=TABLE, key="id", schema=USERS_SCHEMA)


def users_store(
    redis_url: str, postgres_url: str | None = None, redis_lookup: type[RedisLookup] | None = None
) -> Any:
    """The demo's users lookup: the PostgreSQL table with ``postgres_url``
    (:func:`users_lookup`), else the JSON documents
    ``user:<id>`` in Redis, through ``redis_lookup`` (``RedisLookup`` by default)."""
    if postgres_url:
        return users_lookup(postgres_url)
    from connectors.redis import RedisLookup

    lookup = redis_lookup or RedisLookup
    return lookup(
        redis_url, key_template="user:{}", value="json", schema="name string, tier string"
    )
