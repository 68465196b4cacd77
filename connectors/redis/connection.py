"""Connections of the standalone Redis pool, packing commands with hiredis's C packer.

redis.asyncio packs every command in pure Python, even when hiredis is installed (only
sync redis-py uses ``hiredis.pack_command``); for a 500-key MGET that is most of the
client-side cost of a round trip. :func:`connection_class` gives the pool a connection
class that packs with hiredis instead, and falls back to redis-py's own packer for
anything hiredis would pack differently or refuse, so the bytes on the wire are the same.
Without hiredis it returns redis-py's classes unchanged.

The pool's encoder must be redis-py's default (UTF-8, strict), as hiredis encodes ``str``
arguments that way: ``_redis_client`` never sets another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from redis.asyncio.connection import Connection, SSLConnection

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    import hiredis

    _hiredis_pack = hiredis.pack_command
except ImportError:  # hiredis is optional: redis-py's packer does the same, slower
    _hiredis_pack = None


class HiredisPackingConnection(Connection):
    """A ``Connection`` whose commands are packed by ``hiredis.pack_command``.

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
        assert pack is not None  # connection_class hands out this class only then
        packed: list[bytes] = []
        for command in commands:
            args = tuple(command)
            name = args[0]
            if type(name) is str and " " not in name:
                try:
                    packed.append(pack(args))
                    continue
                except TypeError:
                    pass  # redis-py converts the argument or says what is wrong with it
            packed += super().pack_command(*args)
        return [b"".join(packed)] if packed else []


class HiredisPackingSSLConnection(HiredisPackingConnection, SSLConnection):
    """An ``SSLConnection`` whose commands are packed by ``hiredis.pack_command``."""


def connection_class(tls: bool) -> type[Connection]:
    """The connection class of a standalone pool: hiredis packing when hiredis is installed."""
    if _hiredis_pack is None:
        return SSLConnection if tls else Connection
    return HiredisPackingSSLConnection if tls else HiredisPackingConnection
