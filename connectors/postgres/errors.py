"""asyncpg's errors -> the SPI's, in one line naming the server and never a secret.

=========================================  ==========================================
asyncpg / OS error                          becomes
=========================================  ==========================================
wrong password, no such role (28P01/28000)  ``SourceUnavailable`` ``kind="auth"``, final
no such database (3D000)                    ``SourceUnavailable`` ``kind="database"``, final
refused, reset, DNS, closed, shut down,     ``SourceUnavailable`` ``kind="connection"``,
starting up (08xxx, 57P0x, OSError)         retryable (the engine's retry bridges a
                                            restart)
too many connections (53300)                ``SourceUnavailable`` ``kind="connection"``
statement timeout (57014), client timeout   ``LookupFailed`` ``kind="timeout"``, retryable
TLS refused or not trusted                  ``SourceUnavailable`` ``kind="tls"``, final
no such table / column / function (42xxx)   ``LookupFailed`` ``kind="schema"``, final
permission denied (42501)                   ``LookupFailed`` ``kind="permission"``, final
a key the column's type refuses             ``LookupFailed`` ``kind="key"``, final (that
                                            key alone: see ``PostgresLookup``)
anything else the server says               ``LookupFailed`` ``kind="postgres"``, final
=========================================  ==========================================
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from asyncpg import exceptions as px

from connectors.sql import SqlSettings as PgSettings
from enrich.spi import LookupFailed, SourceUnavailable, mask_text

_log = logging.getLogger("connectors.postgres")

# What translate() takes; anything else (a bug) propagates unchanged.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    px.PostgresError,
    px.InterfaceError,
    px.InternalClientError,
    OSError,
    asyncio.TimeoutError,
    ssl.SSLError,
)
# A pooled connection that died under us (a restart, an idle timeout): worth one more
# try at once, on a new connection, before the engine's retry policy is asked.
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    px.ConnectionDoesNotExistError,
    px.AdminShutdownError,
    px.CrashShutdownError,
    px.ConnectionFailureError,
    ConnectionResetError,
    BrokenPipeError,
)
_UNREACHABLE: tuple[type[BaseException], ...] = (
    px.PostgresConnectionError,
    px.CannotConnectNowError,
    px.AdminShutdownError,
    px.CrashShutdownError,
    px.TooManyConnectionsError,
    OSError,
)


class RefusedArgument(Exception):
    """asyncpg refused a key of a batch before sending it (the keys are then asked one
    by one, so that only the refused ones fail)."""


def is_bad_argument(exc: BaseException) -> bool:
    """Whether asyncpg refused a statement's argument (a key that does not fit the
    column's type): raised before anything is sent, so the other keys may be asked."""
    return isinstance(exc, px.DataError) or (
        isinstance(exc, px.InterfaceError) and "invalid input for query argument" in str(exc)
    )


def _one_line(exc: BaseException, settings: PgSettings) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return mask_text(text, settings.url.secrets)


def translate(exc: BaseException, settings: PgSettings, key: Any = None) -> LookupFailed:
    """The SPI error for a driver error (see the module table)."""
    url = settings.url
    where = f"postgres at {url.address}"
    detail = _one_line(exc, settings)
    error: LookupFailed
    if isinstance(exc, (px.InvalidPasswordError, px.InvalidAuthorizationSpecificationError)):
        user = f" for user {url.username!r}" if url.username else ""
        error = SourceUnavailable(
            f"{where} refused the login{user}: wrong password or no such user ({detail})",
            key=key,
            kind="auth",
            retryable=False,
        )
    elif isinstance(exc, px.InvalidCatalogNameError):
        error = SourceUnavailable(
            f"{where}: database {url.database!r} does not exist ({detail})",
            key=key,
            kind="database",
            retryable=False,
        )
    elif isinstance(exc, (px.QueryCanceledError, asyncio.TimeoutError)):
        error = LookupFailed(
            f"{where}: statement timed out after {settings.timeout:g}s ({detail})",
            key=key,
            kind="timeout",
        )
    elif isinstance(exc, ssl.SSLCertVerificationError) or "certificate verify failed" in detail:
        error = SourceUnavailable(
            f"{where}: TLS certificate not trusted ({detail})", key=key, kind="tls", retryable=False
        )
    elif isinstance(exc, ssl.SSLError) or "rejected SSL upgrade" in detail:
        error = SourceUnavailable(
            f"{where}: TLS failed ({detail})", key=key, kind="tls", retryable=False
        )
    elif isinstance(exc, _UNREACHABLE) or (
        isinstance(exc, px.InterfaceError) and "connection is closed" in detail
    ):
        error = SourceUnavailable(f"{where} is unreachable ({detail})", key=key, kind="connection")
    elif isinstance(exc, (px.UndefinedTableError, px.InvalidSchemaNameError)):
        error = LookupFailed(
            f"{where}: table {settings.target.table_name!r} does not exist ({detail})",
            key=key,
            kind="schema",
            retryable=False,
        )
    elif isinstance(exc, px.InsufficientPrivilegeError):
        error = LookupFailed(
            f"{where}: permission denied ({detail})", key=key, kind="permission", retryable=False
        )
    elif isinstance(exc, px.SyntaxOrAccessError):
        error = LookupFailed(
            f"{where}: {settings.target.table_name}: {detail}",
            key=key,
            kind="schema",
            retryable=False,
        )
    elif is_bad_argument(exc):
        error = LookupFailed(
            f"{where}: key refused by the key column's type ({detail})",
            key=key,
            kind="key",
            retryable=False,
        )
    else:
        error = LookupFailed(
            f"{where} answered with an error ({detail})", key=key, kind="postgres", retryable=False
        )
    _log.debug("%s", error)
    return error


def is_connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says a pooled connection died (see :data:`CONNECTION_LOST`)."""
    if isinstance(exc, CONNECTION_LOST):
        return True
    return isinstance(exc, px.InterfaceError) and "connection is closed" in str(exc)
