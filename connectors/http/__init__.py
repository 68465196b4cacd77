"""Look up dimension rows in an HTTP/JSON service, one request per key or in batches.

Usage::

    from connectors.http import HttpLookup

    users = HttpLookup(
        "http://users-svc:8080/users/{}",
        schema="name string, tier string",
        headers={"Authorization": f"Bearer {token}"},
        path="data.user",                  # pick the sub-document {"data": {"user": {...}}}
        fields={"tier": "account.tier"},   # read a field from a nested path
        rate_limit=200.0,                  # requests per second, per process
        max_connections=50,
        timeout=2.0,
    )
    rows = await users.lookup_many(["u1", "u2"])   # {"u1": ("Ada", "gold"), "u2": None}
    await users.aclose()

URL templates have positional ``{}`` slots only (no named slots), in path segments or
query values: ``"http://svc/orgs/{}/users/{}?v=2"`` takes tuple keys ``("acme", "u1")``,
filled in order. Each component is percent-encoded into its own slot, ``/``, ``?``, ``#``,
``..`` and all, so no key can reach another path, host or query parameter.

With ``batch_url="http://users-svc:8080/users:batch"`` the keys are POSTed as a JSON array
(``max_batch`` per request) and the service answers with a JSON object mapping ``str(key)``
to the key's document (null or absent: a miss). Composite (tuple) keys are sent as JSON
arrays and answered under their compact JSON text (``'["acme","u1"]'``).

Answers: 200 decodes the JSON (orjson when installed); an object is one row, an array is
several rows (1:N). 404 is a miss. Errors follow :mod:`connectors.http.errors`: 429/503
carry the ``Retry-After`` hint in ``LookupFailed.retry_after``; other 5xx, timeouts and
dropped connections are retryable; 401/403 and other 4xx are not. The connector makes one
attempt per call: the engine retries, honouring ``retry_after``.

Secrets: header values and credentials never appear in ``repr()``, error messages or
logs; neither do query values of the URL templates (put API keys in headers anyway).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import aiohttp

from connectors.loop_local import LoopLocal
from enrich import DecodeError, LookupFailed, Schema
from enrich.engine.checks import short
from enrich.lookup.schema import SchemaLike
from enrich.lookup.source import answers_as_completed

from . import body
from .pool import Pool
from .request import send
from .settings import (
    DEFAULT_FOLLOW_REDIRECTS,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_VALUE_BYTES,
    DEFAULT_METHOD,
    DEFAULT_TIMEOUT,
    RedirectPolicy,
    Settings,
)
from .url import MASK, KeyShapeError

__all__ = ("HttpLookup",)

_REGISTRY = "connectors.http"

_log = logging.getLogger(__name__)


class HttpLookup:
    """A :class:`~enrich.LookupSource` reading JSON documents from an HTTP service.

    Guarantees:

    * A key fills its URL slot percent-encoded: it can never change the scheme, host,
      port, or the path and query structure of the request (see ``connectors.http.url``).
    * Per-key mode: each key gets one request and fails alone (its value is the
      ``LookupFailed`` or ``DecodeError``); at most ``max_connections`` requests are in
      flight per process and, with ``rate_limit``, at most that many start per second
      (in bursts of at most a tenth of a second's worth).
    * Batch mode: a POST that fails gives every key of its chunk that error; when every
      chunk of the call failed, ``lookup_many`` raises it instead.
    * One attempt per call: retries belong to the engine.
    * Configured headers and credentials go to the template's origin only: redirects are
      not followed unless ``follow_redirects="same-origin"``, and never elsewhere.
    * No body longer than ``max_value_bytes`` is read whole: a declared Content-Length
      over it is refused unread, an undeclared one is read in chunks up to the limit.
    * The object is a picklable description; its aiohttp session is created lazily on the
      running loop and shared by equal sources of the process.

    Args:
        url_template: ``http(s)`` URL with ``{}`` slots in path segments or query values; a
            tuple key fills several slots in order.
        schema: the dimension fields (Spark DDL, a mapping or a ``Schema``).
        method: ``"GET"`` or ``"POST"`` (per-key requests, no body).
        headers: sent with every request; values are secret (masked in ``repr``).
        auth: ``(login, password)`` or an ``aiohttp.BasicAuth``, sent as a Basic
            ``Authorization`` header.
        batch_url: ``http(s)`` URL without slots; switches to batch mode.
        max_batch: keys per batch POST.
        rate_limit: requests per second per process (None: unlimited).
        max_connections: connections (and requests in flight) per process.
        timeout: seconds per request, from sending to reading the whole body.
        path: dotted path of the sub-document to read (``"data.user"``).
        fields: schema field -> dotted path within the document (default: the field name).
        follow_redirects: ``"never"`` (a 3xx is the key's error, ``kind="redirect"``,
            naming the masked target) or ``"same-origin"`` (follow up to 5 redirects to
            the same scheme, host and port; any other target is refused the same way).
        max_value_bytes: the longest body read for one answer (one batch answer in batch
            mode); a longer one stops being read and fails with ``kind="too_large"``.

    Raises:
        ValueError: a setting is invalid; the message names it and its (redacted) value.
    """

    schema: Schema

    def __init__(
        self,
        url_template: str,
        *,
        schema: SchemaLike,
        method: str = DEFAULT_METHOD,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | aiohttp.BasicAuth | None = None,
        batch_url: str | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        rate_limit: float | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout: float = DEFAULT_TIMEOUT,
        path: str | None = None,
        fields: Mapping[str, str] | None = None,
        follow_redirects: RedirectPolicy = DEFAULT_FOLLOW_REDIRECTS,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.schema = Schema.of(schema)
        self._settings = Settings.build(
            url_template,
            schema=self.schema,
            method=method,
            headers=headers,
            auth=auth,
            batch_url=batch_url,
            max_batch=max_batch,
            rate_limit=rate_limit,
            max_connections=max_connections,
            timeout=timeout,
            path=path,
            fields=fields,
            follow_redirects=follow_redirects,
            max_value_bytes=max_value_bytes,
        )
        self._init_derived()

    def _init_derived(self) -> None:
        # Everything a request needs that the settings fix, worked out once rather than
        # per request: what errors name, the field paths, the process's session.
        settings = self._settings
        self._key_target = f"{settings.method} {settings.template.redacted()}"
        self._batch_target = (
            f"POST {settings.batch.redacted()}" if settings.batch is not None else ""
        )
        self._fields = dict(settings.fields) if settings.fields else None
        self._pools: LoopLocal[Pool] = LoopLocal(
            _REGISTRY, settings, functools.partial(Pool.open, settings), Pool.is_open
        )

    # -- the LookupSource protocol ------------------------------------------------------

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        """Look up distinct keys; see the class docstring for what each value can be.

        Raises:
            LookupFailed: batch mode only, when every batch POST of the call failed.
            DecodeError: batch mode only, when every batch answer was unreadable.
        """
        if not keys:
            return {}
        pool = self._pool()
        if self._settings.batch is None:
            if len(keys) == 1:  # one record's call: no task and no gather for one request
                return {keys[0]: await self._lookup_one(pool, keys[0])}
            return await _gather_dict(keys, [self._lookup_one(pool, key) for key in keys])
        return await self._lookup_batches(pool, keys)

    async def lookup_each(self, keys: Sequence[Any]) -> AsyncIterator[Mapping[Any, Any]]:
        """Look up distinct keys, handing each answer over as soon as it arrives: per-key
        mode yields every GET's answer as it completes (a key that hangs holds back no
        other key), batch mode each POST's answers.

        Raises:
            LookupFailed, DecodeError: batch mode only, as :meth:`lookup_many`, when every
                batch POST failed.
        """
        if not keys:
            return
        pool = self._pool()
        if self._settings.batch is None:
            if len(keys) == 1:  # nothing to hand over early: no task for one request
                yield {keys[0]: await self._lookup_one(pool, keys[0])}
                return
            calls = {key: self._lookup_one(pool, key) for key in keys}
        else:
            size = self._settings.max_batch
            chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
            calls = {n: self._lookup_chunk(pool, chunk) for n, chunk in enumerate(chunks)}
        failures: list[Exception] = []
        async for found in answers_as_completed(calls):
            if self._settings.batch is None:
                yield found
                continue
            for n, outcome in found.items():
                if not isinstance(outcome, Exception):
                    yield outcome
                elif len(failures) + 1 == len(chunks):
                    raise outcome  # every POST of the call failed: the call fails
                else:
                    failures.append(outcome)
                    yield dict.fromkeys(chunks[n], outcome)

    async def aclose(self) -> None:
        """Close and forget this process's session for the running loop (reopens on use)."""
        pool = self._pools.pop()
        if pool is not None:
            await pool.session.close()

    # -- per-key mode -------------------------------------------------------------------

    async def _lookup_one(self, pool: Pool, key: Any) -> Any:
        settings = self._settings
        try:
            url = settings.template.expand(key)
        except KeyShapeError as exc:
            return LookupFailed(
                f"{self._target()} for key {short(key)}: {exc}",
                key=key,
                kind="key",
                retryable=False,
            )
        try:
            payload = await send(
                pool, settings, settings.method, url, key=key, data=None, target=self._key_target
            )
        except LookupFailed as exc:
            _log.debug("lookup failed: %s", exc)
            return exc
        if payload is None:
            return None
        try:
            return self._rows(body.loads(payload, self.schema.loads))
        except DecodeError as exc:
            _log.debug("%s for key %s: %s", self._target(), short(key), exc)
            return exc

    # -- batch mode ---------------------------------------------------------------------

    async def _lookup_batches(self, pool: Pool, keys: Sequence[Any]) -> dict[Any, Any]:
        size = self._settings.max_batch
        chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
        outcomes = await asyncio.gather(*(self._lookup_chunk(pool, chunk) for chunk in chunks))
        failures = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
        if len(failures) == len(chunks):
            raise failures[0]
        result: dict[Any, Any] = {}
        for chunk, outcome in zip(chunks, outcomes, strict=True):
            if isinstance(outcome, Exception):
                result.update(dict.fromkeys(chunk, outcome))
            else:
                result.update(outcome)
        return result

    async def _lookup_chunk(
        self, pool: Pool, chunk: Sequence[Any]
    ) -> dict[Any, Any] | LookupFailed | DecodeError:
        batch = self._settings.batch
        assert batch is not None
        data = body.dumps([list(key) if isinstance(key, tuple) else key for key in chunk])
        try:
            target = self._target(batch=True)
            payload = await send(
                pool, self._settings, "POST", batch.url(), key=None, data=data, target=target
            )
            answer = body.loads(payload or b"null", self.schema.loads)
            if not isinstance(answer, Mapping):
                raise DecodeError(
                    f"batch answer must be a JSON object keyed by str(key), got {short(answer)}",
                    value=answer,
                )
        except (LookupFailed, DecodeError) as exc:
            _log.debug("batch of %d key(s) failed: %s", len(chunk), exc)
            return exc
        result: dict[Any, Any] = {}
        for key in chunk:
            try:
                result[key] = self._rows(answer.get(_batch_key(key)))
            except DecodeError as exc:
                result[key] = exc
        return result

    def _rows(self, document: Any) -> body.Rows:
        return body.to_rows(document, self.schema, path=self._settings.path, fields=self._fields)

    def _target(self, *, batch: bool = False) -> str:
        """What errors name: the method and the masked URL template."""
        return self._batch_target if batch and self._batch_target else self._key_target

    # -- the process's session ----------------------------------------------------------

    def _pool(self) -> Pool:
        # An aiohttp session belongs to the loop it was created on. In production that is
        # the one runtime loop of the process, but tests (pytest-asyncio: a loop per test)
        # and drivers calling asyncio.run() use several, so each loop gets its own session.
        return self._pools.get()

    # -- value semantics --------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        # The description only: what _init_derived works out is rebuilt on arrival, and
        # a live session never travels.
        return {"schema": self.schema, "_settings": self._settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_derived()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HttpLookup) and other._settings == self._settings

    def __hash__(self) -> int:
        return hash(self._settings)

    def __repr__(self) -> str:
        s = self._settings
        parts = [repr(s.template.redacted()), f"schema={s.schema!r}"]
        if s.method != DEFAULT_METHOD:
            parts.append(f"method={s.method!r}")
        shown = {name: MASK for name, _ in s.headers}
        if s.has_auth:
            shown.pop("Authorization", None)
            parts.append(f"auth={MASK!r}")
        if shown:
            parts.append(f"headers={shown!r}")
        if s.batch is not None:
            parts.append(f"batch_url={s.batch.redacted()!r}, max_batch={s.max_batch}")
        if s.rate_limit is not None:
            parts.append(f"rate_limit={s.rate_limit:g}")
        parts.append(f"max_connections={s.max_connections}, timeout={s.timeout:g}")
        if s.follow_redirects != DEFAULT_FOLLOW_REDIRECTS:
            parts.append(f"follow_redirects={s.follow_redirects!r}")
        if s.max_value_bytes != DEFAULT_MAX_VALUE_BYTES:
            parts.append(f"max_value_bytes={s.max_value_bytes}")
        if s.path:
            parts.append(f"path={'.'.join(s.path)!r}")
        if s.fields:
            parts.append(f"fields={ {name: '.'.join(p) for name, p in s.fields}!r}")
        return f"HttpLookup({', '.join(parts)})"


async def _gather_dict(keys: Sequence[Any], calls: Sequence[Any]) -> dict[Any, Any]:
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        values = await asyncio.gather(*tasks)
    finally:
        for task in tasks:  # after a bug in one task or a cancellation: stop the others
            task.cancel()
    return dict(zip(keys, values, strict=True))


def _batch_key(key: Any) -> str:
    if isinstance(key, tuple):
        return body.dumps(list(key)).decode()
    return str(key)
