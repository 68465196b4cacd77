"""Settings of the HTTP connector: one frozen, hashable, validated record per source."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import aiohttp

from enrich.spi import JobRateLimit, Schema, check_choice, check_int, check_positive

from . import body
from .url import MASK, UrlTemplate

DEFAULT_METHOD = "GET"
DEFAULT_MAX_CONNECTIONS = 100
# With concurrency="auto" the adaptive limit finds the level; this only caps it.
DEFAULT_AUTO_MAX_CONNECTIONS = 1000
DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_BATCH = 100
# One answer's body larger than this fails its key (its batch, in batch mode).
DEFAULT_MAX_VALUE_BYTES = 16 * 1024 * 1024
RedirectPolicy = Literal["never", "same-origin"]
DEFAULT_FOLLOW_REDIRECTS: RedirectPolicy = "never"

_METHODS = ("GET", "POST")
# "fixed": at most max_connections requests in flight; "auto": an adaptive limit up to it.
CONCURRENCY = ("fixed", "auto")
DEFAULT_CONCURRENCY = "fixed"
# "never": a 3xx is the key's error. "same-origin": follow to the same scheme, host and
# port only, where the configured headers may go; anywhere else is refused.
_REDIRECT_POLICIES = ("never", "same-origin")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything that defines a source; equal settings share a process's session.

    Secrets live in ``headers`` (``auth`` becomes an ``Authorization`` header), which
    this record's ``repr`` leaves out: it is part of the process-local registry's keys.
    """

    template: UrlTemplate
    schema: Schema
    method: str
    headers: tuple[tuple[str, str], ...] = field(repr=False)
    has_auth: bool
    batch: UrlTemplate | None
    max_batch: int
    rate_limit: float | None
    max_connections: int
    timeout: float
    path: body.Path
    fields: tuple[tuple[str, body.Path], ...]
    follow_redirects: RedirectPolicy = DEFAULT_FOLLOW_REDIRECTS
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    job_rate_limit: JobRateLimit | None = None
    concurrency: str = DEFAULT_CONCURRENCY

    @classmethod
    def build(
        cls,
        url_template: str,
        *,
        schema: Schema,
        method: str,
        headers: Mapping[str, str] | None,
        auth: tuple[str, str] | aiohttp.BasicAuth | None,
        batch_url: str | None,
        max_batch: int,
        rate_limit: float | None,
        max_connections: int | None,
        timeout: float,
        path: str | None,
        fields: Mapping[str, str] | None,
        follow_redirects: RedirectPolicy = DEFAULT_FOLLOW_REDIRECTS,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        job_rate_limit: float | JobRateLimit | None = None,
        concurrency: str = DEFAULT_CONCURRENCY,
    ) -> Settings:
        """Validate ``HttpLookup``'s arguments.

        Raises:
            ValueError: naming the setting and its value (secrets masked).
        """
        upper = method.upper() if isinstance(method, str) else method
        if upper not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        header_items = _check_headers(headers)
        if auth is not None:
            if any(name.lower() == "authorization" for name, _ in header_items):
                raise ValueError("auth and an Authorization header cannot both be given")
            header_items += (("Authorization", _basic_auth(auth)),)
        batch = None
        if batch_url is not None:
            batch = UrlTemplate.parse(batch_url, name="batch_url", slots="none")
        template = UrlTemplate.parse(url_template)
        concurrency = check_choice("concurrency", concurrency, CONCURRENCY)
        if max_connections is None:
            auto = concurrency == "auto"
            max_connections = DEFAULT_AUTO_MAX_CONNECTIONS if auto else DEFAULT_MAX_CONNECTIONS
        job_limit = JobRateLimit.of(job_rate_limit, name="job_rate_limit")
        if job_limit is not None:
            job_limit = job_limit.for_store(f"http {template.redacted()}", default_url=None)
        return cls(
            template=template,
            schema=schema,
            method=str(upper),
            headers=header_items,
            has_auth=auth is not None,
            batch=batch,
            max_batch=check_int("max_batch", max_batch, rule="> 0"),
            rate_limit=None if rate_limit is None else check_positive("rate_limit", rate_limit),
            max_connections=check_int("max_connections", max_connections, rule="> 0"),
            timeout=check_positive("timeout", timeout),
            path=body.parse_path(path, name="path"),
            fields=_check_fields(fields, schema),
            follow_redirects=_redirect_policy(follow_redirects),
            max_value_bytes=check_int("max_value_bytes", max_value_bytes, rule="> 0"),
            job_rate_limit=job_limit,
            concurrency=concurrency,
        )

    def described(self) -> str:
        """The source's arguments as ``repr`` shows them: header values, credentials and
        the templates' query values masked; defaults left out."""
        parts = [repr(self.template.redacted()), f"schema={self.schema!r}"]
        if self.method != DEFAULT_METHOD:
            parts.append(f"method={self.method!r}")
        shown = {name: MASK for name, _ in self.headers}
        if self.has_auth:
            shown.pop("Authorization", None)
            parts.append(f"auth={MASK!r}")
        if shown:
            parts.append(f"headers={shown!r}")
        if self.batch is not None:
            parts.append(f"batch_url={self.batch.redacted()!r}, max_batch={self.max_batch}")
        if self.rate_limit is not None:
            parts.append(f"rate_limit={self.rate_limit:g}")
        if self.job_rate_limit is not None:
            parts.append(f"job_rate_limit={self.job_rate_limit.described()}")
        parts.append(f"max_connections={self.max_connections}, timeout={self.timeout:g}")
        if self.concurrency != DEFAULT_CONCURRENCY:
            parts.append(f"concurrency={self.concurrency!r}")
        if self.follow_redirects != DEFAULT_FOLLOW_REDIRECTS:
            parts.append(f"follow_redirects={self.follow_redirects!r}")
        if self.max_value_bytes != DEFAULT_MAX_VALUE_BYTES:
            parts.append(f"max_value_bytes={self.max_value_bytes}")
        if self.path:
            parts.append(f"path={'.'.join(self.path)!r}")
        if self.fields:
            parts.append(f"fields={ {name: '.'.join(p) for name, p in self.fields}!r}")
        return ", ".join(parts)


def _redirect_policy(value: RedirectPolicy) -> RedirectPolicy:
    if value not in _REDIRECT_POLICIES:
        raise ValueError(f"follow_redirects must be one of {_REDIRECT_POLICIES}, got {value!r}")
    return value


def _basic_auth(auth: tuple[str, str] | aiohttp.BasicAuth) -> str:
    # Sent as a header rather than aiohttp's auth=, which aiohttp 3.14 deprecates.
    if not isinstance(auth, tuple) or len(auth) not in (2, 3):
        raise ValueError(f"auth must be (login, password) or aiohttp.BasicAuth, got {type(auth)}")
    login, password = auth[0], auth[1]
    encoding = auth[2] if len(auth) == 3 else "utf-8"
    if not isinstance(login, str) or not isinstance(password, str) or ":" in login:
        raise ValueError(f"auth must be (login, password) strings, login without ':'; got {MASK}")
    return "Basic " + base64.b64encode(f"{login}:{password}".encode(encoding)).decode("ascii")


def _check_headers(headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    if headers is None:
        return ()
    if not isinstance(headers, Mapping):
        raise ValueError(f"headers must be a mapping, got {type(headers).__name__}")
    items = []
    for name, value in headers.items():
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise ValueError(f"headers must map non-empty names to strings, got {name!r}: {MASK}")
        items.append((name, value))
    return tuple(items)


def _check_fields(
    fields: Mapping[str, str] | None, schema: Schema
) -> tuple[tuple[str, body.Path], ...]:
    if fields is None:
        return ()
    if not isinstance(fields, Mapping):
        raise ValueError(f"fields must map schema fields to JSON paths, got {fields!r}")
    out = []
    for name, path in fields.items():
        if name not in schema.names:
            raise ValueError(f"fields: {name!r} is not a schema field {list(schema.names)}")
        out.append((name, body.parse_path(path, name=f"fields[{name!r}]") or (name,)))
    return tuple(out)
