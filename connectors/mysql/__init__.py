"""MySQL and MariaDB as a dimension store: one statement per batch of keys, over aiomysql.

Example::

    from connectors.mysql import MySqlLookup

    users = MySqlLookup(
        "mysql://reader:secret@db.internal:3306/shop",
        table="users",
        key="id",
        schema="name string, tier string, credit double",
    )
    rows = await users.lookup_many([42, 43])  # {42: ("Ada", "gold", 12.5), 43: None}

    accounts = MySqlLookup(
        "mysql://reader@db.internal/shop?ssl-mode=verify_identity&ssl-ca=/etc/ca.pem",
        password="...",               # or in the URL
        table="accounts",
        key=["tenant", "id"],         # composite: lookup_join(..., on=["tenant", "user_id"])
    )                                 # no schema: the table's other columns, types mapped

    recent = MySqlLookup(
        "mysql://reader:secret@db.internal/shop",
        query="SELECT o.user_id, o.total FROM orders o WHERE o.user_id IN (:keys)",
        key="user_id",
        schema="total decimal(10,2)",  # several rows per key: a 1:N join
    )

What is sent: for a batch of keys, ``SET STATEMENT max_statement_time=5 FOR SELECT `id`,
CAST(`name` AS CHAR) AS `name`, ... FROM `users` WHERE `id` IN (1, 2, ...)`` on MariaDB
(MySQL: ``SELECT /*+ MAX_EXECUTION_TIME(5000) */ ...``), at most ``max_batch`` keys a
statement (a composite key: ``(`tenant`, `id`) IN (('eu', 1), ...)``), the keys escaped
into the text by the driver (aiomysql has no server-side prepared statements). A full
cache (``FullCache``) streams ``SELECT ... ORDER BY `id``` through an unbuffered cursor.

The database-neutral half (URL, target, statements, types, rows to answers) is
:mod:`connectors.sql`; this package adds aiomysql's pool (:mod:`.pool`), MySQL's spelling
(:mod:`.dialect`), its error translation (:mod:`.errors`) and the reading of a table's
columns (:mod:`.describe`).
"""

from __future__ import annotations

from .source import (
    MySqlLookup as MySqlLookup,
)

__all__ = ("MySqlLookup",)
