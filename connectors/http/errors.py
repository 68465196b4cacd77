"""HTTP statuses and aiohttp errors, translated into the enrich error tree.

=====================================  =====================  =========  ===========
what happened                          error                  kind       retryable
=====================================  =====================  =========  ===========
404 (per-key requests)                 none: a miss
429, 503 (+ ``Retry-After``)           LookupFailed           status:N   yes
408, other 5xx                         LookupFailed           status:N   yes
401, 403, 407                          SourceUnavailable      status:N   no
other 4xx, unexpected 1xx              LookupFailed           status:N   no
3xx not followed (see below)           LookupFailed           redirect   no
body over ``max_value_bytes``          LookupFailed           too_large  no
timeout (connect or total)             LookupFailed           timeout    yes
refused, DNS                           SourceUnavailable      connection yes
TLS certificate or handshake           SourceUnavailable      tls        no
dropped connection, truncated body     LookupFailed           connection yes
=====================================  =====================  =========  ===========

A redirect is followed only with ``follow_redirects="same-origin"`` and only to the same
scheme, host and port; a refused one names where it pointed, masked.

Messages name the method, the masked URL template and the key; never a header, a
credential or a query value of the template or of a redirect's target.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import math
from typing import Any

import aiohttp

from enrich.spi import LookupFailed, SourceUnavailable, mask_url, short

_AUTH_STATUSES = frozenset({401, 403, 407})


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP-date.

    Args:
        value: the header's value, or None when absent.
        now: the current wall-clock time (``time.time()``), for HTTP-dates.

    Returns:
        A non-negative number of seconds (a date in the past gives 0.0), or None when the
        header is absent or unreadable.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT ("-0000" parses as naive)
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - now)


def status_error(status: int, *, target: str, key: Any, retry_after: float | None) -> LookupFailed:
    """The error for an HTTP status that is neither a success nor a miss."""
    where = _where(target, key)
    kind = f"status:{status}"
    if status in _AUTH_STATUSES:
        return SourceUnavailable(
            f"{where}: HTTP {status} (check the credentials)", key=key, kind=kind, retryable=False
        )
    retryable = status in (408, 429) or 500 <= status <= 599
    hint = f", retry after {retry_after:g}s" if retryable and retry_after is not None else ""
    return LookupFailed(
        f"{where}: HTTP {status}{hint}",
        key=key,
        kind=kind,
        retryable=retryable,
        retry_after=retry_after if retryable else None,
    )


def redirect_error(status: int, location: str, *, target: str, key: Any, why: str) -> LookupFailed:
    """The error for a redirect that was not followed; ``location`` is shown masked."""
    return LookupFailed(
        f"{_where(target, key)}: HTTP {status} redirect to {mask_url(location)} refused ({why})",
        key=key,
        kind="redirect",
        retryable=False,
    )


def too_large_error(limit: int, *, target: str, key: Any, declared: int | None) -> LookupFailed:
    """The error for a body longer than ``max_value_bytes``: its reading was stopped."""
    seen = f"Content-Length {declared}" if declared is not None else "reading stopped at the limit"
    return LookupFailed(
        f"{_where(target, key)}: answer larger than max_value_bytes={limit} ({seen})",
        key=key,
        kind="too_large",
        retryable=False,
    )


def transport_error(exc: BaseException, *, target: str, key: Any) -> LookupFailed:
    """The error for an exception raised by aiohttp while sending or reading.

    Only the exception's class (and, for socket errors, the OS's reason) reaches the
    message: aiohttp's own messages may quote the full URL.
    """
    where = _where(target, key)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return LookupFailed(f"{where}: timed out", key=key, kind="timeout", retryable=True)
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientSSLError):
        return SourceUnavailable(
            f"{where}: TLS failed ({name})", key=key, kind="tls", retryable=False
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or name
        return SourceUnavailable(
            f"{where}: cannot connect ({reason})", key=key, kind="connection", retryable=True
        )
    if isinstance(exc, aiohttp.InvalidURL):
        return LookupFailed(f"{where}: invalid URL", key=key, kind="url", retryable=False)
    return LookupFailed(f"{where}: connection failed ({name})", key=key, kind="connection")


def _where(target: str, key: Any) -> str:
    return target if key is None else f"{target} for key {short(key)}"
