"""A toy connector written only from docs/writing-a-connector.md: lookups in the key-value
store of ``tests/support/kv_server.py`` (a line protocol over TCP: ``AUTH``, ``MGET``).

``KvLookup("kv://:password@host:port", schema="name string, tier int")``: a key's stored
value is a JSON document, its row the schema's fields (absent fields null). A store key is
the key's text (a composite key: its parts joined by ``:``). Each ``MGET`` carries at most
``max_keys`` keys over one of at most ``pool_size`` connections per process and loop;
waiting for a free connection is marked ``held_back`` (it is the job's own queue, not the
store's time) and each request is bounded by ``timeout``.

Errors: a store that cannot be reached or refuses the password raises
``SourceUnavailable``; a request not answered within ``timeout`` raises ``LookupFailed``
(``kind="timeout"``, retryable); a stored value that is not JSON or does not fit the schema
fails its own key with ``DecodeError``. No message or repr shows the password.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from enrich.spi import (
    DecodeError,
    LookupFailed,
    Schema,
    SchemaLike,
    SourceUnavailable,
    check_int,
    check_positive,
    held_back,
    loop_resource,
    mask_url,
    pop_loop_resource,
    short,
)

SCHEME = "kv"
DEFAULT_POOL_SIZE = 4  # connections per process and loop
DEFAULT_MAX_KEYS = 256  # keys per MGET
DEFAULT_TIMEOUT = 5.0  # seconds per request (connecting, or one MGET)
CAPACITY_PER_REQUEST = 4  # requests' worth of rows in flight per connection
_OWNER = "tests.kv"


@dataclass(frozen=True)
class Settings:
    """What identifies a pool: equal settings share one per process and loop."""

    host: str
    port: int
    password: str | None = field(repr=False)
    pool_size: int
    max_keys: int
    timeout: float


class KvLookup:
    """Lookups in the toy key-value store: a picklable description, no live state.

    Guarantees: one ``MGET`` per ``max_keys`` distinct keys, each bounded by ``timeout``;
    at most ``pool_size`` requests in flight per process and loop, the rest waiting
    (held back) for a connection; a connection whose request failed is closed, never
    reused.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: SchemaLike,
        pool_size: int = DEFAULT_POOL_SIZE,
        max_keys: int = DEFAULT_MAX_KEYS,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.schema = Schema.of(schema)
        self._url = url
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme != SCHEME or not parts.hostname or parts.port is None:
            shown = mask_url(url) if isinstance(url, str) else short(url)
            raise ValueError(f"url must be kv://[:password@]host:port, got {shown!r}")
        self._settings = Settings(
            host=parts.hostname,
            port=parts.port,
            password=parts.password,
            pool_size=check_int("pool_size", pool_size),
            max_keys=check_int("max_keys", max_keys),
            timeout=check_positive("timeout", timeout, "a number of seconds"),
        )

    @property
    def preferred_capacity(self) -> int:
        """Rows in flight per Spark task when the join's ``capacity`` is not set: a few
        requests' worth per connection of the pool."""
        settings = self._settings
        return CAPACITY_PER_REQUEST * settings.pool_size * settings.max_keys

    async def lookup_many(self, keys: Sequence[Any]) -> Mapping[Any, Any]:
        pool = loop_resource(_OWNER, self._settings, self._open)
        size = self._settings.max_keys
        chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
        answers: dict[Any, Any] = {}
        for found in await asyncio.gather(*(self._mget(pool, chunk) for chunk in chunks)):
            answers.update(found)
        return answers

    async def aclose(self) -> None:
        pool = pop_loop_resource(_OWNER, self._settings)
        if pool is not None:
            pool.close()

    def _open(self, loop: asyncio.AbstractEventLoop) -> _Pool:
        return _Pool(loop, self._settings.pool_size)

    async def _mget(self, pool: _Pool, keys: Sequence[Any]) -> dict[Any, Any]:
        names = {store_key(key): key for key in keys}
        line = "MGET " + json.dumps(list(names))
        connection = await pool.take()
        healthy = None
        try:
            if connection is None:
                connection = await self._bounded(self._connect(), "connect")
            answer = await self._bounded(connection.ask(line), f"answer {len(keys)} key(s)")
            healthy = connection
        except OSError as exc:
            raise SourceUnavailable(
                f"kv store {mask_url(self._url)} is unreachable: {short(exc)}", kind="connection"
            ) from exc
        finally:
            if healthy is None and connection is not None:
                connection.close()  # a request may still be pending on it: never reuse it
            pool.give(healthy)
        status, _, body = answer.partition(" ")
        if status != "OK":
            raise LookupFailed(
                f"kv store {mask_url(self._url)}: {short(answer)}", kind="store", retryable=False
            )
        found = json.loads(body)
        return {key: self._row(key, found.get(name)) for name, key in names.items()}

    async def _bounded(self, call: Any, what: str) -> Any:
        timeout = self._settings.timeout
        try:
            return await asyncio.wait_for(call, timeout)
        except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11 on
            raise LookupFailed(
                f"kv store {mask_url(self._url)} did not {what} within {timeout:g}s",
                kind="timeout",
            ) from None

    async def _connect(self) -> _Connection:
        settings = self._settings
        reader, writer = await asyncio.open_connection(settings.host, settings.port)
        connection = _Connection(reader, writer)
        if settings.password is None:
            return connection
        try:
            answer = await connection.ask(f"AUTH {settings.password}")
        except BaseException:  # cancelled by the timeout, or the store went away
            connection.close()
            raise
        if answer != "OK":
            connection.close()
            raise SourceUnavailable(
                f"kv store {mask_url(self._url)} refused the password: {short(answer)}",
                kind="auth",
                retryable=False,
            )
        return connection

    def _row(self, key: Any, text: str | None) -> Any:
        if text is None:
            return None
        try:
            return self.schema.coerce(json.loads(text))
        except json.JSONDecodeError:
            return DecodeError(f"key {short(key)}: {short(text)} is not JSON", value=text)
        except DecodeError as exc:
            return DecodeError(f"key {short(key)}: {exc}", field=exc.field, value=exc.value)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, KvLookup)
            and other._settings == self._settings
            and other.schema == self.schema
        )

    def __hash__(self) -> int:
        return hash((self._settings, self.schema))

    def __repr__(self) -> str:
        return f"KvLookup({mask_url(self._url)!r}, pool_size={self._settings.pool_size})"


def store_key(key: Any) -> str:
    """The store's name for a lookup key: its text; a composite key's parts joined by ``:``."""
    if isinstance(key, tuple):
        return ":".join(store_key(part) for part in key)
    if isinstance(key, bytes):
        return key.decode()
    return str(key)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def ask(self, line: str) -> str:
        self.writer.write(line.encode() + b"\n")
        await self.writer.drain()
        answer = await self.reader.readline()
        if not answer:
            raise ConnectionResetError("the store closed the connection")
        return answer.decode().rstrip("\n")

    def close(self) -> None:
        self.writer.close()


class _Pool:
    """This process's connections to one store on one loop: ``pool_size`` places, each
    idle (a connection, or None: not opened yet) or taken by a request; the place given
    back last is taken first, so open connections serve before new ones are opened."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self.loop = loop
        self.closed = False
        self._idle: asyncio.LifoQueue[_Connection | None] = asyncio.LifoQueue()
        for _ in range(size):
            self._idle.put_nowait(None)

    async def take(self) -> _Connection | None:
        if self._idle.empty():
            with held_back():  # queued behind our own requests: not the store's time
                return await self._idle.get()
        return self._idle.get_nowait()

    def give(self, connection: _Connection | None) -> None:
        if self.closed and connection is not None:
            connection.close()
            connection = None
        self._idle.put_nowait(connection)

    def close(self) -> None:
        self.closed = True
        while not self._idle.empty():
            connection = self._idle.get_nowait()
            if connection is not None:
                connection.close()
