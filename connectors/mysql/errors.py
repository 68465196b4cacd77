"""PyMySQL's (and so aiomysql's) errors -> the SPI's, in one line naming the server and
never a secret.

==============================================  =========================================
PyMySQL / OS error (server error code)          becomes
==============================================  =========================================
access denied (1045, 1044, 1698)                ``SourceUnavailable`` ``kind="auth"``, final
no such database (1049)                         ``SourceUnavailable`` ``kind="database"``
can't connect, gone away, lost, shutting down,  ``SourceUnavailable`` ``kind="connection"``,
killed, too many connections (2003, 2006, 2013,  retryable (the engine's retry bridges a
1053, 1927, 1040, 1152, 2002), InterfaceError,   restart)
OSError
statement time exceeded (1969 MariaDB, 3024     ``LookupFailed`` ``kind="timeout"``,
MySQL), the client's own timeout                retryable
TLS refused or not trusted                      ``SourceUnavailable`` ``kind="tls"``, final
no such table (1146), column (1054), bad SQL    ``LookupFailed`` ``kind="schema"``, final
(1064)
permission denied (1142, 1143)                  ``LookupFailed`` ``kind="permission"``
a value the server refuses (DataError)          ``LookupFailed`` ``kind="key"``, final
anything else the server says                   ``LookupFailed`` ``kind="mysql"``, final
==============================================  =========================================
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

import pymysql

from connectors.sql import SqlSettings
from enrich.spi import LookupFailed, SourceUnavailable, mask_text

__all__ = ("DRIVER_ERRORS", "is_connection_lost", "translate")

_log = logging.getLogger("connectors.mysql")

# What translate() takes; anything else (a bug) propagates unchanged.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    pymysql.err.MySQLError,
    OSError,
    asyncio.TimeoutError,
    ssl.SSLError,
)
_AUTH = {1044, 1045, 1698}
_UNREACHABLE = {1040, 1053, 1152, 1927, 2002, 2003, 2006, 2013, 2055}
# A pooled connection that died under us (a restart, wait_timeout): worth one more try
# at once, on a new connection, before the engine's retry policy is asked.
_LOST = {2006, 2013, 2055, 1053, 1927}
_TIMEOUT = {1969, 3024}
_SCHEMA = {1054, 1064, 1146, 1149}
_PERMISSION = {1142, 1143}


def code(exc: BaseException) -> int | None:
    """The server's (or client's) error number of a PyMySQL error, or None."""
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def _cause(exc: BaseException) -> BaseException | None:
    """What aiomysql wrapped in its "Can't connect" error (refused, TLS, DNS), if anything."""
    cause = exc.__cause__ or exc.__context__
    return cause if isinstance(cause, (OSError, asyncio.TimeoutError)) else None


def _detail(exc: BaseException, settings: SqlSettings) -> str:
    args = exc.args
    if isinstance(exc, pymysql.err.MySQLError) and len(args) >= 2:
        text = f"{args[0]}: {args[1]}"
        cause = _cause(exc)
        if cause is not None:
            text += f": {cause or type(cause).__name__}"
    else:
        text = str(exc) or type(exc).__name__
    return mask_text(" ".join(text.split()), settings.url.secrets)


def is_connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says a pooled connection died (see :data:`_LOST`)."""
    if isinstance(exc, pymysql.err.InterfaceError):
        return True  # "(0, '')": the connection is closed
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return True
    return code(exc) in _LOST


def translate(exc: BaseException, settings: SqlSettings, key: Any = None) -> LookupFailed:
    """The SPI error for a driver error (see the module table)."""
    url = settings.url
    where = f"mysql at {url.address}"
    detail = _detail(exc, settings)
    number = code(exc)
    error: LookupFailed
    if number in _AUTH:
        user = f" for user {url.username!r}" if url.username else ""
        error = SourceUnavailable(
            f"{where} refused the login{user}: wrong password or no such user ({detail})",
            key=key,
            kind="auth",
            retryable=False,
        )
    elif number == 1049:
        error = SourceUnavailable(
            f"{where}: database {url.database!r} does not exist ({detail})",
            key=key,
            kind="database",
            retryable=False,
        )
    elif number in _TIMEOUT or isinstance(exc, asyncio.TimeoutError):
        error = LookupFailed(
            f"{where}: statement timed out after {settings.timeout:g}s ({detail})",
            key=key,
            kind="timeout",
        )
    elif isinstance(exc, ssl.SSLError) or isinstance(_cause(exc), ssl.SSLError):
        error = SourceUnavailable(
            f"{where}: TLS failed ({detail})", key=key, kind="tls", retryable=False
        )
    elif (
        number in _UNREACHABLE
        or isinstance(exc, (OSError, pymysql.err.InterfaceError))
        or (number is not None and 2000 <= number < 2100)  # the client's CR_* errors
    ):
        error = SourceUnavailable(f"{where} is unreachable ({detail})", key=key, kind="connection")
    elif number in _SCHEMA:
        error = LookupFailed(
            f"{where}: {settings.target.table_name}: {detail}",
            key=key,
            kind="schema",
            retryable=False,
        )
    elif number in _PERMISSION:
        error = LookupFailed(
            f"{where}: permission denied ({detail})", key=key, kind="permission", retryable=False
        )
    elif isinstance(exc, pymysql.err.DataError):
        error = LookupFailed(
            f"{where}: value refused ({detail})", key=key, kind="key", retryable=False
        )
    else:
        error = LookupFailed(
            f"{where} answered with an error ({detail})", key=key, kind="mysql", retryable=False
        )
    _log.debug("%s", error)
    return error
