"""Commands packed by hiredis are the bytes redis-py's own packer sends."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection, SSLConnection
from redis.exceptions import DataError

from connectors.redis import connection as _redis_connection
from connectors.redis.connection import (
    HiredisPackingConnection,
    HiredisPackingSSLConnection,
    connection_class,
)

pytest.importorskip("hiredis")

COMMANDS: list[tuple[Any, ...]] = [
    ("MGET", *(f"user:{i}".encode() for i in range(500))),
    ("HMGET", b"h:\x00\xff", b"name", b"tier"),
    ("HGETALL", b""),
    ("AUTH", "reader", "pässwörd"),
    ("SELECT", 3),
    ("SET", b"k", 1.5, "EX", 2**40),
    ("SET", b"k", memoryview(b"value")),
    ("SET", bytearray(b"k"), b"v"),  # hiredis refuses bytearray: redis-py packs it
    ("CONFIG GET", "maxmemory"),  # redis-py splits the name into two words
    (b"MGET", b"a"),
]


def _wire(chunks: list[bytes]) -> bytes:
    return b"".join(bytes(chunk) for chunk in chunks)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: str(c[0]))
def test_pack_command_matches_redis_py(command: tuple[Any, ...]) -> None:
    ours, theirs = HiredisPackingConnection(), Connection()

    assert _wire(ours.pack_command(*command)) == _wire(theirs.pack_command(*command))


def test_pack_commands_matches_redis_py() -> None:
    ours, theirs = HiredisPackingConnection(), Connection()

    assert _wire(ours.pack_commands(COMMANDS)) == _wire(theirs.pack_commands(COMMANDS))
    assert ours.pack_commands([]) == theirs.pack_commands([]) == []


@pytest.mark.parametrize("bad", [None, True])
def test_unpackable_arguments_raise_redis_pys_error(bad: Any) -> None:
    with pytest.raises(DataError) as ours:
        HiredisPackingConnection().pack_command("SET", b"k", bad)
    with pytest.raises(DataError) as theirs:
        Connection().pack_command("SET", b"k", bad)

    assert str(ours.value) == str(theirs.value)


def test_connection_class_keeps_tls_and_falls_back_without_hiredis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert connection_class(tls=False) is HiredisPackingConnection
    assert connection_class(tls=True) is HiredisPackingSSLConnection
    assert issubclass(HiredisPackingSSLConnection, SSLConnection)

    monkeypatch.setattr(_redis_connection, "_hiredis_pack", None)

    assert connection_class(tls=False) is Connection
    assert connection_class(tls=True) is SSLConnection
