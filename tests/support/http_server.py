"""A scriptable HTTP/JSON service for connector tests: a real aiohttp server on 127.0.0.1.

It runs on its own loop in a daemon thread, so async tests (any loop) and synchronous
callers (Spark workers, ``run_sync``) can use it alike. Each test scripts it, then reads
what it received::

    server.data["u1"] = {"name": "Ada"}           # GET .../u1 -> 200 {"name": "Ada"}
    server.fail("u2", 503, retry_after="7")        # -> 503 with Retry-After: 7
    server.latency["u3"] = 0.2                     # answer after 200 ms (a batch: its slowest)
    server.malformed.add("u4")                     # -> 200 with a body that is not JSON
    server.drop.add("u5")                          # headers, half a body, then a closed socket
    server.redirect("u6", "http://elsewhere/u6")   # -> 302 with that Location
    server.large["u7"] = (b"[" * 2**22, False)     # that body, streamed in chunks, no length
    server.raw["u8"] = b'{"n": NaN}'              # in a batch answer, that JSON text as is
    server.requests                                # every request, with its raw path
    server.wait_for_requests(100, timeout=60)      # block until 100 have arrived

A request's key is its last path segment, percent-decoded (or its ``id`` query value when
there is one); unknown keys get 404. ``POST /batch`` takes a JSON array of keys and answers
``{str(key): document}`` for the known ones (composite keys: their compact JSON text).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from aiohttp import web

BATCH_PATH = "/batch"
# GET /list?page=N[&size=S]: the data's object documents, sorted by key, S a page
# (default 2), each with its key as "id" ({"items": [...]}); a page past the end is empty.
LIST_PATH = "/list"


@dataclass(frozen=True)
class Received:
    """One request as the server saw it.

    Attributes:
        method: the HTTP method.
        raw_path: path and query exactly as sent, still percent-encoded.
        key: the key the server read from it.
        headers: the request headers.
        body: the request body.
        started: ``time.monotonic()`` when the handler started.
    """

    method: str
    raw_path: str
    key: str | None
    headers: Mapping[str, str]
    body: bytes
    started: float

    @property
    def segments(self) -> list[str]:
        """The raw (still encoded) path segments."""
        return self.raw_path.partition("?")[0].split("/")[1:]


@dataclass
class _Script:
    data: dict[str, Any] = field(default_factory=dict)
    status: dict[str, tuple[int, dict[str, str]]] = field(default_factory=dict)
    # Key -> how many more requests get its scripted status (absent: every request).
    status_times: dict[str, int] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    malformed: set[str] = field(default_factory=set)
    drop: set[str] = field(default_factory=set)
    batch_status: tuple[int, dict[str, str]] | None = None
    batch_body: bytes | None = None
    raw: dict[str, bytes] = field(default_factory=dict)
    redirects: dict[str, tuple[int, str]] = field(default_factory=dict)
    large: dict[str, tuple[bytes, bool]] = field(default_factory=dict)
    default_latency: float = 0.0


class HttpTestServer:
    """The server; ``start()`` it once, ``reset()`` it between tests, ``stop()`` it at the end."""

    def __init__(self) -> None:
        self._script = _Script()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: list[Received] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.ServerRunner | None = None
        self._web_server: web.Server | None = None
        self.port = 0

    # -- scripting (from the test's thread) ---------------------------------------------

    @property
    def data(self) -> dict[str, Any]:
        """Key -> JSON document answered with 200."""
        return self._script.data

    @property
    def latency(self) -> dict[str, float]:
        """Key -> seconds to wait before answering."""
        return self._script.latency

    @property
    def malformed(self) -> set[str]:
        """Keys answered with 200 and a body that is not JSON."""
        return self._script.malformed

    @property
    def drop(self) -> set[str]:
        """Keys whose connection is closed halfway through the response body."""
        return self._script.drop

    @property
    def large(self) -> dict[str, tuple[bytes, bool]]:
        """Key -> (body, declare its Content-Length): a 200 streamed in 64 KiB writes.

        Each write waits for the client to take it, so the server never holds more than
        the body itself, and a client that stops reading stops the stream.
        """
        return self._script.large

    @property
    def raw(self) -> dict[str, bytes]:
        """Key -> JSON text put in batch answers as it is (before ``data``): duplicate
        names, ``NaN`` tokens, line breaks and all."""
        return self._script.raw

    def answer_batch_with(self, body: bytes) -> None:
        """Answer every batch POST with 200 and ``body``, whatever the keys."""
        self._script.batch_body = body

    def redirect(self, key: str, location: str, status: int = 302) -> None:
        """Answer ``key`` with ``status`` and ``Location: location``."""
        self._script.redirects[key] = (status, location)

    def set_default_latency(self, seconds: float) -> None:
        self._script.default_latency = seconds

    def fail(
        self, key: str, status: int, *, retry_after: str | None = None, times: int | None = None
    ) -> None:
        """Answer ``key`` with ``status`` (and a ``Retry-After`` header when given).

        With ``times``, only the next ``times`` requests for ``key`` get ``status``; later
        ones are answered as if it had never been scripted to fail.
        """
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        with self._lock:
            self._script.status[key] = (status, headers)
            if times is None:
                self._script.status_times.pop(key, None)
            else:
                self._script.status_times[key] = times

    def fail_batch(self, status: int, *, retry_after: str | None = None) -> None:
        """Answer every batch POST with ``status``."""
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        self._script.batch_status = (status, headers)

    def reset(self) -> None:
        """Forget the script, the request log and the concurrency record."""
        with self._lock:
            self._script = _Script()
            self._requests = []
            self._max_in_flight = 0

    # -- observations -------------------------------------------------------------------

    @property
    def requests(self) -> list[Received]:
        """Every request received since the last reset, in arrival order."""
        with self._lock:
            return list(self._requests)

    def wait_for_requests(self, count: int, timeout: float) -> list[Received]:
        """Block until at least ``count`` requests arrived since the last reset (from a
        thread other than the server's); returns every request so far.

        Raises:
            TimeoutError: fewer arrived within ``timeout`` seconds (the message says how
                many).
        """
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self._requests) >= count, timeout):
                raise TimeoutError(
                    f"{len(self._requests)} requests arrived in {timeout} s, waited for {count}"
                )
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most requests the server was handling at the same time."""
        with self._lock:
            return self._max_in_flight

    @property
    def open_connections(self) -> int:
        """How many client connections are open now (kept alive or busy)."""
        loop, server = self._loop, self._web_server
        if loop is None or server is None:
            return 0

        async def count() -> int:
            return len(server.connections)

        return asyncio.run_coroutine_threadsafe(count(), loop).result(timeout=5)

    def url(self, path: str = "") -> str:
        """``http://127.0.0.1:<port><path>``; ``{}`` slots pass through."""
        return f"http://127.0.0.1:{self.port}{path}"

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="http-test-server", daemon=True
        )
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), loop).result(timeout=10)

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None

    async def _start(self) -> None:
        # A low-level server rather than an Application: the router would answer 404 itself
        # for decoded paths its patterns do not match (a key with a newline). Keys of
        # 10,000 characters (30,000 bytes once encoded) must fit in a request line; a
        # handler is cancelled when its client goes away (a test's timeout) so nothing
        # keeps sleeping after the test.
        server = web.Server(
            self._handle,
            handler_cancellation=True,
            max_line_size=1 << 20,
            max_field_size=1 << 16,
            access_log=None,
        )
        self._web_server = server
        runner = web.ServerRunner(server, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- serving (on the server's thread) -----------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        started = time.monotonic()
        body = await request.read()
        key = _key_of(request.raw_path)
        with self._lock:
            script = self._script
            self._requests.append(
                Received(
                    request.method, request.raw_path, key, dict(request.headers), body, started
                )
            )
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self._arrived.notify_all()
        try:
            if request.raw_path.partition("?")[0] == BATCH_PATH:
                return await self._batch(script, body)
            if request.raw_path.partition("?")[0] == LIST_PATH:
                return self._list(script, request.query)
            return await self._one(request, script, key)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _one(
        self, request: web.BaseRequest, script: _Script, key: str | None
    ) -> web.StreamResponse:
        delay = script.latency.get(key or "", script.default_latency)
        if delay:
            await asyncio.sleep(delay)
        if key in script.status and self._take_failure(script, key):
            status, headers = script.status[key]
            return web.json_response({"error": status}, status=status, headers=headers)
        if key in script.redirects:
            status, location = script.redirects[key]
            return web.Response(status=status, headers={"Location": location})
        if key in script.large:
            return await _stream(request, *script.large[key])
        if key in script.malformed:
            return web.Response(body=b'{"name": "Ada", oops', content_type="application/json")
        if key in script.drop:
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.content_length = 1000
            await response.prepare(request)
            await response.write(b'{"name": "Ad')
            assert request.transport is not None
            request.transport.close()
            return response
        if key is None or key not in script.data:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(script.data[key])

    def _take_failure(self, script: _Script, key: str) -> bool:
        """Whether this request for ``key`` gets its scripted status (counting it down)."""
        with self._lock:
            left = script.status_times.get(key)
            if left is None:
                return True
            if left <= 0:
                return False
            script.status_times[key] = left - 1
            return True

    async def _batch(self, script: _Script, body: bytes) -> web.StreamResponse:
        # A batch takes the longest latency of its keys (the default for the others).
        delay = script.default_latency
        if script.latency:
            try:
                named = [script.latency.get(str(key), 0.0) for key in json.loads(body)]
            except (ValueError, TypeError):
                named = []
            delay = max([delay, *named])
        if delay:
            await asyncio.sleep(delay)
        if script.batch_status is not None:
            status, headers = script.batch_status
            return web.json_response({"error": status}, status=status, headers=headers)
        if script.batch_body is not None:
            return web.Response(body=script.batch_body, content_type="application/json")
        keys = json.loads(body)
        parts: list[bytes] = []
        for key in keys:
            text = (
                json.dumps(key, separators=(",", ":"), ensure_ascii=False)
                if isinstance(key, list)
                else str(key)
            )
            if text in script.malformed:
                return web.Response(body=b"[not json", content_type="application/json")
            if text in script.raw:
                parts.append(json.dumps(text).encode() + b": " + script.raw[text])
            elif text in script.data:
                parts.append(
                    json.dumps(text).encode() + b": " + json.dumps(script.data[text]).encode()
                )
        answer = b"{" + b", ".join(parts) + b"}"
        return web.Response(body=answer, content_type="application/json")

    def _list(self, script: _Script, query: Any) -> web.StreamResponse:
        if LIST_PATH in script.status and self._take_failure(script, LIST_PATH):
            status, headers = script.status[LIST_PATH]
            return web.json_response({"error": status}, status=status, headers=headers)
        page, size = int(query.get("page", 0)), int(query.get("size", 2))
        documents = sorted((key, doc) for key, doc in script.data.items() if isinstance(doc, dict))
        items = [{"id": key, **doc} for key, doc in documents[page * size : (page + 1) * size]]
        return web.json_response({"items": items})


async def _stream(request: web.BaseRequest, body: bytes, declare: bool) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    if declare:
        response.content_length = len(body)
    await response.prepare(request)
    view = memoryview(body)
    try:
        for start in range(0, len(body), 1 << 16):
            await response.write(view[start : start + (1 << 16)])
        await response.write_eof()
    except (ConnectionError, RuntimeError):
        pass  # the client stopped reading and went away: that is what is tested
    return response


def _key_of(raw_path: str) -> str | None:
    path, _, query = raw_path.partition("?")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "id":
            return value
    segment = path.rsplit("/", 1)[-1]
    return unquote(segment) if segment else None


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (for connection-refused tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
