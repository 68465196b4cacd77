"""Connections of the standalone Redis pool: commands packed in C, or already packed.

redis.asyncio packs every command in pure Python, even when hiredis is installed (only
sync redis-py uses ``hiredis.pack_command``); for a 500-key MGET that is most of the
client-side cost of a round trip. The pool's :class:`PackingConnection` packs with
hiredis instead when it is installed, and falls back to redis-py's own packer for
anything hiredis would pack differently or refuse, so the bytes on the wire are the same.

It also sends :class:`Packed` arguments as they are: the columnar lookup frames a whole
MGET's keys in RESP with Arrow compute (:mod:`connectors.redis.arrow`), so no key
becomes a Python object on the way out.

The pool's encoder must be redis-py's default (UTF-8, strict), as hiredis encodes ``str``
arguments that way: :func:`connectors.redis.client._open` never sets another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from redis.asyncio.connection import Connection, SSLConnection

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    import hiredis

    _hiredis_pack = hiredis.pack_command
except ImportError:  # hiredis is optional: redis-py's packer does the same, slower
    _hiredis_pack = None


@dataclass(frozen=True, slots=True)
class Packed:
    """A command's arguments after its name, already in RESP: ``count`` bulk strings
    (``$<length>\\r\\n<bytes>\\r\\n`` each) in ``payload``. Only :class:`PackingConnection`
    sends it: a command is ``(name, Packed(...))``."""

    payload: bytes
    count: int

    def __repr__(self) -> str:  # never the payload: it may be large
        return f"Packed({self.count} arguments, {len(self.payload)} bytes)"


class PackingConnection(Connection):
    """A ``Connection`` whose commands are packed by ``hiredis.pack_command`` (when
    installed), and which sends a :class:`Packed` command's payload as it is.

    The bytes sent are those redis-py's own packer would send: a command hiredis would
    pack differently (a name with a space, such as ``"CONFIG GET"``, which redis-py
    splits into words) or refuses (a ``bytearray``, ``bool`` or ``None`` argument, which
    redis-py converts or rejects with its own error) is packed by redis-py.
    """

    def pack_command(self, *args: Any) -> list[bytes]:
        """The command in RESP."""
        return self.pack_commands((args,))

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        """The commands in RESP, in one buffer."""
        pack = _hiredis_pack
        packed: list[bytes] = []
        for command in commands:
            args = tuple(command)
            name = args[0]
            if len(args) == 2 and type(args[1]) is Packed and type(name) is str:
                head = name.encode()
                packed.append(b"*%d\r\n$%d\r\n%s\r\n" % (args[1].count + 1, len(head), head))
                packed.append(args[1].payload)
                continue
            if pack is not None and type(name) is str and " " not in name:
                try:
                    packed.append(pack(args))
                    continue
                except TypeError:
                    pass  # redis-py converts the argument or says what is wrong with it
            packed += super().pack_command(*args)
        return [b"".join(packed)] if packed else []


class PackingSSLConnection(PackingConnection, SSLConnection):
    """An ``SSLConnection`` packing as :class:`PackingConnection` does."""


def connection_class(tls: bool) -> type[Connection]:
    """The connection class of a standalone pool."""
    return PackingSSLConnection if tls else PackingConnection
