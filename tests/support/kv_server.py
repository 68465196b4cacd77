"""A tiny key-value store speaking a line protocol over TCP on 127.0.0.1, for the toy
connector of ``docs/writing-a-connector.md`` (``tests/connectors/kv_lookup.py``).

A real server (``asyncio.start_server``) on a free loopback port, on its own loop in a
daemon thread, so async tests (any loop) and Spark's Python workers reach it alike. One
request line, one answer line, UTF-8::

    AUTH <password>                 -> OK | ERR wrong password
    MGET <JSON array of keys>       -> OK <JSON object: key -> stored text> (absent: a miss)

With a password set, a connection must ``AUTH`` first (``ERR auth required`` otherwise).
A test scripts it, then reads what it received::

    server.data["u1"] = '{"name": "Ada", "tier": 2}'   # stored texts (JSON documents)
    server.silent.set()                                  # read requests, answer none
    server.requests                                      # the keys of every MGET
    server.connections                                   # connections accepted
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import Future
from typing import Any


class KvServer:
    """The store: ``data`` (key -> text), ``password`` (None: no AUTH), ``silent`` (set:
    requests are read, never answered), ``requests`` (the keys of each MGET read, in
    order, answered or not), ``connections`` (how many were accepted)."""

    def __init__(self, password: str | None = None) -> None:
        self.data: dict[str, str] = {}
        self.password = password
        self.silent = threading.Event()
        self.requests: list[list[str]] = []
        self.connections = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        secret = f":{self.password}@" if self.password is not None else ""
        return f"kv://{secret}127.0.0.1:{self.port}"

    def start(self) -> KvServer:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        """Stop listening and drop every connection (a store that went away)."""
        if self._server is not None:
            server, self._server = self._server, None
            self._call(self._close(server))
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    async def _close(self, server: asyncio.Server) -> None:
        server.close()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await server.wait_closed()

    def _call(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=30)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        authenticated = self.password is None
        try:
            while line := await reader.readline():
                command, _, argument = line.decode().rstrip("\n").partition(" ")
                keys = [str(key) for key in json.loads(argument)] if command == "MGET" else []
                if keys:
                    self.requests.append(keys)
                if self.silent.is_set():
                    continue
                if command == "AUTH":
                    authenticated = argument == self.password
                    answer = "OK" if authenticated else "ERR wrong password"
                elif not authenticated:
                    answer = "ERR auth required"
                elif command == "MGET":
                    found = {key: self.data[key] for key in keys if key in self.data}
                    answer = "OK " + json.dumps(found)
                else:
                    answer = f"ERR unknown command {command[:20]!r}"
                writer.write(answer.encode() + b"\n")
                await writer.drain()
        except (ConnectionError, ValueError):
            pass  # a client that went away, or a line that is not JSON: drop it
        finally:
            self._handlers.discard(handler)
            writer.close()
