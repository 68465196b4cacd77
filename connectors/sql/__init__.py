"""The database-neutral half of the relational connectors (PostgreSQL, MySQL/MariaDB).

``connectors.postgres`` (asyncpg) and ``connectors.mysql`` (aiomysql) share what does not
depend on the driver; each adds its driver's pool, statements and error translation.
Like every connector, this package imports only :mod:`enrich.spi` and ``enrich``'s public
face.

The pieces, one module each:

* :mod:`~connectors.sql.url` -- :class:`DatabaseUrl`: ``scheme://user:pw@host:port/db?...``
  parsed once (percent-decoded user info, a ``password=`` keyword winning over the URL's,
  query parameters kept for the driver); ``masked()`` and ``secrets`` keep the password
  out of reprs and messages (with :func:`enrich.spi.mask_text`).
* :mod:`~connectors.sql.target` -- :class:`Target`: ``table=`` + ``key=`` (one column or a
  list: a composite key, joined with ``on=[...]`` in the same order), or ``query=`` with
  one ``:keys`` parameter; :func:`batch_statement` / :func:`full_statement` build the SQL
  through a :class:`Dialect` (quoting, per-field casts, the key filter). Every statement
  returns the **row layout**: key column(s) first, then the schema's fields in order.
* :mod:`~connectors.sql.columns` -- :func:`schema_from_columns`: a table's
  ``information_schema.columns`` mapped to a dimension schema when ``schema=`` is not
  given; :class:`UnmappableColumn` (a :class:`~enrich.SchemaError`) names a column whose
  type maps to nothing.
* :mod:`~connectors.sql.answers` -- :class:`RowReader`: rows of the layout -> the SPI's
  answers (a tuple, a list of tuples for a 1:N key, None for a miss, the key's own
  :class:`~enrich.spi.DecodeError`); :func:`store_key` / :func:`fit_key` for matching and
  checking keys; :func:`dimension_pages` for a full cache (rows ordered by key, grouped
  into pages without splitting a key).
* :mod:`~connectors.sql.settings` -- :class:`SqlSettings`: pool size and lifetime,
  statement timeout, batch size, ``concurrency``, ``job_rate_limit``; frozen and hashable
  (the key of a process's pool).
* :mod:`~connectors.sql.handles` -- the per-loop pool handle's driver-neutral half: the
  store protections around each statement (:class:`~connectors.sql.handles.Protections`:
  the job rate limit's share, the adaptive limit's slots), the plan read once per schema
  (:class:`~connectors.sql.handles.SqlHandle`) and the registry of handles by settings.
* :mod:`~connectors.sql.batches` -- :func:`~connectors.sql.batches.batch_answers`: a
  call's keys fitted to the key columns, cut into batches of ``max_batch`` sent
  concurrently, a lone batch's failure raised, the call raising when every batch failed.
* :mod:`~connectors.sql.lookup` -- :class:`SqlLookup`: the lookup source both connectors
  subclass: construction (the table's columns read when no schema is given), the
  batches, the columnar lookup's default, ``aclose``, pickling, equality and a
  password-free ``repr``.

What a driver package adds (see ``connectors.postgres``): a ``SqlLookup`` subclass naming
its store (``kind``, URL schemes, default port and batch size) and its handles, that
reads the table's columns when no schema is given, plans (the key columns' types, the
statements), sends ``batch_statement`` for one batch of keys on a pooled connection of
the runtime loop through the shared protections, translates the driver's errors
(connection -> :class:`~enrich.spi.SourceUnavailable`, retryable; timeout -> retryable
:class:`~enrich.spi.LookupFailed`; authentication, a missing table or column -> not
retryable, one line naming it, no secret), and implements ``scan_dimension``
(``full_statement`` + ``dimension_pages``) so that ``FullCache`` can load the table.
"""

from __future__ import annotations

from .answers import (
    RowReader as RowReader,
    dimension_pages as dimension_pages,
    fit_key as fit_key,
    store_key as store_key,
)
from .columns import (
    Column as Column,
    UnmappableColumn as UnmappableColumn,
    schema_from_columns as schema_from_columns,
)
from .lookup import (
    SqlLookup as SqlLookup,
)
from .settings import (
    DEFAULT_MAX_BATCH as DEFAULT_MAX_BATCH,
    DEFAULT_MAX_LIFETIME as DEFAULT_MAX_LIFETIME,
    DEFAULT_POOL_SIZE as DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT as DEFAULT_TIMEOUT,
    SqlSettings as SqlSettings,
)
from .target import (
    KEYS_PARAMETER as KEYS_PARAMETER,
    Dialect as Dialect,
    Target as Target,
    batch_statement as batch_statement,
    full_statement as full_statement,
)
from .url import (
    DatabaseUrl as DatabaseUrl,
)

__all__ = (
    "DatabaseUrl",
    "Target",
    "Dialect",
    "KEYS_PARAMETER",
    "batch_statement",
    "full_statement",
    "Column",
    "UnmappableColumn",
    "schema_from_columns",
    "RowReader",
    "dimension_pages",
    "fit_key",
    "store_key",
    "SqlSettings",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_LIFETIME",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_TIMEOUT",
    "SqlLookup",
)
