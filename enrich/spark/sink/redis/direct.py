"""The idempotent writes (``mode=idempotent``): each task sends its rows' commands to
Redis itself, in pipelined chunks.

On a standalone Redis a task's commands are built a column at a time from each Arrow
batch (:mod:`~enrich.spark.sink.redis.frames`), gathered across batches into chunks of about
:data:`CHUNK_ROWS` rows, and each chunk goes out as ``MULTI``, its commands, ``EXEC`` in
one write on one connection; the next chunk is sent before the replies of the one
before are read, so building, sending and Redis's work overlap. What a reader sees:

- a hash is replaced whole: its ``DEL`` and ``HSET`` run in one ``MULTI``, so no reader
  sees it empty or half replaced (keyed upserts end exactly-once in effect: a replay
  rewrites the same keys);
- a chunk of rows appears at once (a ``MULTI`` runs alone on the server, so a chunk
  bounds everyone's pause: ~1-2 ms for 1,000 hashes on the reference machine);
- stream entries (and dead letters) are appended in the task's row order, at least once
  (a replayed batch appends again).

Every reply is checked: a command Redis refused (``WRONGTYPE``: the key holds another
type; ``OOM``) fails the task with :class:`WriteRefused`, naming the command, the key
and Redis's message. The chunks sent before it stay written.

On a Redis Cluster (no ``MULTI`` across slots) the rows go through redis-py's cluster
pipeline row by row: a pipeline per node, each hash replaced by one script call on its
key (so a reader never sees it half replaced), stream entries and JSON values as
commands routed by their key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from enrich import EnrichError

from .. import hooks
from . import frames
from .row_writes import RowEncoder

CHUNK_ROWS = 1_000  # rows per MULTI (about a round trip and 1-2 ms of Redis time each)
CLUSTER_CHUNK = 500  # rows per cluster pipeline

_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC = b"*1\r\n$4\r\nEXEC\r\n"

# KEYS: a hash. ARGV: its new fields and values. Replaces the hash in one step.
REPLACE_HASH = """
redis.call('DEL', KEYS[1])
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return 0
"""


class WriteRefused(EnrichError, RuntimeError):
    """Redis refused a command of an idempotent write (the task fails; the chunks sent
    before it stay written).

    Attributes:
        command: the command's name (``XADD``, ``DEL``, ``HSET``, ``SET``).
        key: the key it wrote.
        reason: Redis's error message.
    """

    retryable = False

    def __init__(self, command: str, key: str, reason: str) -> None:
        super().__init__(
            f"redis sink: Redis refused {command} {key!r}: {reason} (mode idempotent; "
            "the rows of the chunks before it are written)"
        )
        self.command, self.key, self.reason = command, key, reason


def write(
    client: Any, encoder: RowEncoder, items: Iterator[Any], batch_id: Any, transaction: bool = True
) -> int:
    """Write the rows of ``items`` (Arrow batches, or ``Row`` objects) to a standalone
    Redis through ``client``; returns the rows written. ``transaction=False`` sends the
    chunks without ``MULTI`` (measurements only: a reader may then see a hash deleted
    and not yet set)."""
    connection = client.connection_pool.get_connection()
    replies: _Replies | None = None
    in_flight: tuple[frames.Commands, int, int] | None = None  # sent, replies not read
    count = 0
    try:
        for chunk in _chunks(encoder, items):
            payload = chunk[0].joined(chunk[1], chunk[2])
            connection.send_packed_command([_MULTI, payload, _EXEC] if transaction else [payload])
            replies = replies or _Replies.of(connection)
            if in_flight is not None:
                count += _settle(replies, *in_flight, transaction)
                hooks.pause_if_asked("mid_write", batch_id)
            in_flight = chunk
        if in_flight is not None:
            assert replies is not None
            count += _settle(replies, *in_flight, transaction)
            replies.finish()
    except BaseException:
        connection.disconnect()  # replies may be left unread
        raise
    finally:
        client.connection_pool.release(connection)
    return count


class _Replies:
    """A connection's replies, error replies as exception values (not raised).

    Read straight off the connection's socket by a hiredis reader of our own where both
    are there (redis-py's ``read_response`` costs ~5 us a reply in Python, a reply per
    row of a chunk; the reader ~0.3 us), else through ``read_response``.
    """

    def __init__(self, connection: Any, sock: Any, reader: Any) -> None:
        self._connection, self._sock, self._reader = connection, sock, reader

    @classmethod
    def of(cls, connection: Any) -> _Replies:
        sock = getattr(connection, "_sock", None)
        try:
            import hiredis
        except ImportError:  # pragma: no cover - the redis extra installs hiredis
            return cls(connection, None, None)
        if sock is None or not hasattr(sock, "recv"):  # pragma: no cover - a future redis-py
            return cls(connection, None, None)
        return cls(connection, sock, hiredis.Reader())

    def next(self) -> Any:
        """The next reply (waits for it)."""
        reader = self._reader
        if reader is None:
            import redis

            try:
                return self._connection.read_response(disable_decoding=True)
            except redis.ResponseError as exc:
                return exc
        reply = reader.gets()
        while reply is False:
            data = self._sock.recv(_RECEIVE)
            if not data:
                raise ConnectionError("Redis closed the connection in the middle of a write")
            reader.feed(data)
            reply = reader.gets()
        return reply

    def skip(self, count: int) -> list[tuple[int, Any]]:
        """Read ``count`` replies; the errors among them, by their number."""
        errors = []
        for number in range(count):
            reply = self.next()
            if isinstance(reply, Exception):
                errors.append((number, reply))
        return errors

    def finish(self) -> None:
        """Every reply was read: nothing may be left for the connection's own parser."""
        if self._reader is not None and self._reader.has_data():
            raise ConnectionError("Redis sent more replies than the write's commands")


_RECEIVE = 1 << 16


def _chunks(
    encoder: RowEncoder, items: Iterator[Any]
) -> Iterator[tuple[frames.Commands, int, int]]:
    """``(commands, start, stop)``: runs of at most :data:`CHUNK_ROWS` rows, cut from
    each Arrow batch's commands (a batch's tail is its own chunk: no copy). ``Row``
    objects are gathered and encoded row by row."""
    columnar = frames.is_columnar(encoder)
    rows: list[Any] = []
    for item in items:
        if not isinstance(item, pa.RecordBatch):
            rows.append(item)
            if len(rows) >= CHUNK_ROWS:
                yield frames.row_commands(encoder, rows), 0, len(rows)
                rows = []
            continue
        commands = frames.commands(encoder, item) if columnar else None
        if commands is None:
            values = zip(*(column.to_pylist() for column in item.columns), strict=True)
            commands = frames.row_commands(encoder, values)
        for start in range(0, len(commands), CHUNK_ROWS):
            yield commands, start, min(len(commands), start + CHUNK_ROWS)
    if rows:
        yield frames.row_commands(encoder, rows), 0, len(rows)


def _settle(
    replies: _Replies, commands: frames.Commands, start: int, stop: int, transaction: bool
) -> int:
    """Read the replies of a chunk; the rows it wrote.

    Raises:
        WriteRefused: Redis refused one of its commands (the first one is named).
    """
    expected = int(commands.replies[start:stop].sum())
    if not transaction:
        refused = replies.skip(expected)
    else:
        replies.next()  # MULTI's +OK
        refused = replies.skip(expected)  # a +QUEUED per command, or why not
        done = replies.next()  # the replies of the commands, or EXECABORT
        if isinstance(done, list):
            if len(set(map(type, done)) - {bytes, int}) > 0:
                refused += [(n, r) for n, r in enumerate(done) if isinstance(r, Exception)]
        elif not refused:  # pragma: no cover - EXEC fails only after a refused command
            refused.append((0, done))
    if refused:
        number, reason = min(refused, key=lambda found: found[0])
        name, key = _command_at(commands, start, stop, number)
        raise WriteRefused(name, key, str(reason))
    return stop - start


def _command_at(commands: frames.Commands, start: int, stop: int, number: int) -> tuple[str, str]:
    """The name and key of command ``number`` of the chunk (to name it in an error)."""
    seen = 0
    for row in range(start, stop):
        replies = int(commands.replies[row])
        if number < seen + replies:
            args = _arguments(bytes(commands.joined(row, row + 1)))
            name = args[2] if number - seen == 1 else args[0]  # a hash's HSET, after DEL
            return name.decode(), args[1].decode("utf-8", "replace")
        seen += replies
    return "?", "?"  # pragma: no cover - Redis sent more replies than commands


def _arguments(payload: bytes) -> list[bytes]:
    """The arguments of the RESP commands in ``payload``, in order (all commands)."""
    args: list[bytes] = []
    at = 0
    while at < len(payload):
        end = payload.index(b"\r\n", at)
        if payload[at : at + 1] == b"$":
            size = int(payload[at + 1 : end])
            args.append(payload[end + 2 : end + 2 + size])
            at = end + 4 + size
        else:  # *<count>: the start of a command
            at = end + 2
    return args


def write_cluster(cluster: Any, encoder: RowEncoder, rows: Iterator[Any], batch_id: Any) -> int:
    """Write ``rows`` (tuples of values) to a Redis Cluster: a pipeline per node and
    chunk, each hash replaced by one script call on its key."""
    count = 0
    chunk: list[list[str | bytes]] = []
    for row in rows:
        chunk.append(encoder.encode(row))
        if len(chunk) >= CLUSTER_CHUNK:
            count += _send_cluster(cluster, chunk)
            chunk = []
            hooks.pause_if_asked("mid_write", batch_id)
    if chunk:
        count += _send_cluster(cluster, chunk)
    return count


def _send_cluster(cluster: Any, chunk: list[list[str | bytes]]) -> int:
    pipe = cluster.pipeline(transaction=False)
    for kind, key, *rest in chunk:
        if kind == "x":
            pipe.xadd(key, dict(zip(rest[::2], rest[1::2], strict=True)))
        elif kind == "h":
            # ClusterPipeline blocks .eval(); the command itself routes by its key.
            pipe.execute_command("EVAL", REPLACE_HASH, 1, key, *rest)
        else:
            pipe.set(key, rest[0])
    pipe.execute()
    return len(chunk)
