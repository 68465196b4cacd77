"""Commands packed by hiredis are the bytes redis-py's own packer sends."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection, SSLConnection
from redis.exceptions import DataError

from connectors.redis import connection as _redis_connection
from connectors.redis.connection import (
    Packed,
    PackingConnection,
    PackingSSLConnection,
    connection_class,
)

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
    ours, theirs = PackingConnection(), Connection()

    assert _wire(ours.pack_command(*command)) == _wire(theirs.pack_command(*command))


def test_pack_commands_matches_redis_py() -> None:
    ours, theirs = PackingConnection(), Connection()

    assert _wire(ours.pack_commands(COMMANDS)) == _wire(theirs.pack_commands(COMMANDS))
    assert ours.pack_commands([]) == theirs.pack_commands([]) == []


@pytest.mark.parametrize("bad", [None, True])
def test_unpackable_arguments_raise_redis_pys_error(bad: Any) -> None:
    with pytest.raises(DataError) as ours:
        PackingConnection().pack_command("SET", b"k", bad)
    with pytest.raises(DataError) as theirs:
        Connection().pack_command("SET", b"k", bad)

    assert str(ours.value) == str(theirs.value)


def test_connection_class_keeps_tls() -> None:
    assert connection_class(tls=False) is PackingConnection
    assert connection_class(tls=True) is PackingSSLConnection
    assert issubclass(PackingSSLConnection, SSLConnection)


@pytest.mark.parametrize("hiredis", [True, False], ids=["hiredis", "redis-py packer"])
def test_packed_arguments_go_out_as_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch, hiredis: bool
) -> None:
    if not hiredis:
        monkeypatch.setattr(_redis_connection, "_hiredis_pack", None)
    keys = [f"user:{i}".encode() for i in range(3)] + ["clé".encode()]
    payload = b"".join(b"$%d\r\n%s\r\n" % (len(k), k) for k in keys)
    ours = PackingConnection()
    commands = [("MGET", Packed(payload, len(keys))), ("SET", b"k", b"v")]

    assert _wire(ours.pack_commands(commands)) == _wire(
        Connection().pack_commands([("MGET", *keys), ("SET", b"k", b"v")])
    )
    assert "user" not in repr(Packed(payload, len(keys)))


def test_without_hiredis_redis_pys_packer_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_redis_connection, "_hiredis_pack", None)

    for command in COMMANDS[:-3]:
        assert _wire(PackingConnection().pack_command(*command)) == _wire(
            Connection().pack_command(*command)
        )
