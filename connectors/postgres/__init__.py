"""PostgreSQL as a dimension store: one statement per batch of keys, over asyncpg.

Example::

    from connectors.postgres import PostgresLookup

    users = PostgresLookup(
        "postgresql://reader:secret@db.internal:5432/shop",
        table="users",
        key="id",
        schema="name string, tier string, credit double",
    )
    rows = await users.lookup_many([42, 43])  # {42: ("Ada", "gold", 12.5), 43: None}

    accounts = PostgresLookup(
        "postgresql://reader@db.internal/shop?sslmode=verify-full&sslrootcert=/etc/ca.pem",
        password="...",               # or in the URL, or PGPASSWORD / ~/.pgpass
        table="app.accounts",
        key=["tenant", "id"],         # composite: lookup_join(..., on=["tenant", "user_id"])
    )                                 # no schema: the table's other columns, types mapped

    recent = PostgresLookup(
        "postgresql://reader:secret@db.internal/shop",
        query="SELECT o.user_id, o.total FROM orders o WHERE o.user_id = ANY(:keys)",
        key="user_id",
        schema="total decimal(10,2)",  # several rows per key: a 1:N join
    )

What is sent: for a batch of keys, ``SELECT "id", "name"::text AS "name", ... FROM
"users" WHERE "id" = ANY($1)`` with the keys as one array (a composite key: ``("tenant",
"id") IN (SELECT * FROM unnest($1::text[], $2::int8[]))``), prepared once per connection.
A full cache (``FullCache``) reads ``SELECT ... ORDER BY "id"`` through a cursor.

The database-neutral half (URL, target, statements, types, rows to answers) is
:mod:`connectors.sql`; this package adds asyncpg's pool (:mod:`.pool`), PostgreSQL's
spelling (:mod:`.dialect`), its error translation (:mod:`.errors`) and the reading of a
table's columns (:mod:`.describe`).
"""

from __future__ import annotations

from .source import (
    PostgresLookup as PostgresLookup,
)

__all__ = ("PostgresLookup",)
