"""One HTTP attempt: send, follow redirects as allowed, read a bounded body, or fail.

Redirects are followed here, not by aiohttp, and only as ``follow_redirects`` allows:
aiohttp would carry the session's headers (an API key) to any host.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import yarl

from enrich.spi import held_back

from . import body
from .errors import (
    parse_retry_after,
    redirect_error,
    status_error,
    too_large_error,
    transport_error,
)
from .pool import Pool
from .settings import Settings

_JSON = {"Content-Type": "application/json"}
_MAX_REDIRECTS = 5
# Statuses by which a service says it is overloaded: an adaptive limit backs off.
_THROTTLED = (429, 503)


async def send(
    pool: Pool,
    settings: Settings,
    method: str,
    url: yarl.URL,
    *,
    key: Any,
    data: bytes | None,
    target: str,
) -> bytes | None:
    """One attempt: a 2xx body, or None for a per-key miss (404, 204).

    Waits for the job's rate limit, a slot of ``pool`` and its throttle before the
    request's timeout starts. With ``concurrency="auto"`` the request's latency and
    whether it was throttled (429, 503, a timeout) move the slots' limit.
    ``key`` is None for a batch POST (whose 404 is an error, not a miss); ``target``
    (the method and the masked template) is what errors name.

    Raises:
        LookupFailed: any other status, a refused redirect, a body over
            ``max_value_bytes``, a timeout or a connection error.
    """
    if pool.job_limiter is not None:  # the job's budget first: no slot held while waiting
        await pool.job_limiter.acquire(1)
    slots = pool.slots
    if not slots.take():  # a free slot is taken without awaiting (see enrich.protect.slots)
        await slots.wait()
    adaptive = pool.adaptive
    throttled = False
    started: float | None = None
    try:
        if pool.throttler is not None:
            with held_back():  # a permit of the per-process rate: not the store's time
                await pool.throttler.acquire()
        if adaptive is not None:
            started = time.perf_counter()
        try:
            for hops in range(_MAX_REDIRECTS + 1):
                async with pool.session.request(
                    method,
                    url,
                    data=data,
                    headers=_JSON if data is not None else None,
                    allow_redirects=False,
                ) as response:
                    status = response.status
                    if 200 <= status < 300 and status != 204:
                        limit = settings.max_value_bytes
                        if body.is_whole_read(response, limit):
                            return await response.read()
                        return await body.read_bounded(response, limit)
                    await body.drain(response)
                    if key is not None and status in (404, 204):
                        return None
                    if 300 <= status < 400 and "Location" in response.headers:
                        location = response.headers["Location"]
                        to, why = _redirect(url, location, settings, hops)
                        if to is None or why is not None:
                            shown = location if to is None else str(to)
                            raise redirect_error(
                                status, shown, target=target, key=key, why=why or ""
                            )
                        url = to
                        if status == 303 or (status in (301, 302) and method == "POST"):
                            method, data = "GET", None  # as browsers and curl do
                        continue
                    throttled = status in _THROTTLED
                    retry_after = parse_retry_after(
                        response.headers.get("Retry-After"), time.time()
                    )
                    raise status_error(status, target=target, key=key, retry_after=retry_after)
        except body.TooLarge as exc:
            raise too_large_error(
                settings.max_value_bytes, target=target, key=key, declared=exc.declared
            ) from None
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            throttled = isinstance(exc, asyncio.TimeoutError)
            raise transport_error(exc, target=target, key=key) from exc
    finally:
        if adaptive is not None and started is not None:
            slots.release_sampled(adaptive, time.perf_counter() - started, throttled=throttled)
        else:
            slots.release()
    raise AssertionError("unreachable: the loop returns or raises")


def _redirect(
    url: yarl.URL, location: str, settings: Settings, hops: int
) -> tuple[yarl.URL | None, str | None]:
    """Where a redirect points (None: nowhere readable), and why it is refused (None: follow)."""
    try:
        target = url.join(yarl.URL(location))
    except ValueError:
        return None, "the Location header is not a URL"
    if settings.follow_redirects == "never":
        return target, "follow_redirects='never'"
    if target.scheme != url.scheme or target.host != url.host or target.port != url.port:
        return target, "another origin: configured headers never leave the origin"
    if hops >= _MAX_REDIRECTS:
        return target, f"more than {_MAX_REDIRECTS} redirects"
    return target, None
