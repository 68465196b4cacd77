"""JSON bodies for the HTTP connector: bounded reading, decoding, dotted paths, rows.

A response document becomes a lookup value this way:

* ``path`` (``"data.user"``) picks a sub-document; a missing or null step is a miss;
* a JSON object is one row, a JSON array is several rows (1:N; empty = a miss), null is
  a miss;
* each schema field is read from the row by its own name, or by a dotted path from
  ``fields`` (``{"tier": "account.tier"}``); a missing or null step gives None.

Anything that does not fit raises :class:`~enrich.DecodeError`. Path steps that are
digits index into arrays (``"items.0.name"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from enrich.spi import DecodeError, Schema, short

Path = tuple[str, ...]
Rows = tuple[Any, ...] | list[tuple[Any, ...]] | None


def _json_codec() -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    try:
        import orjson
    except ImportError:  # the "fast" extra is optional
        return json.loads, _std_dumps

    def dumps(value: Any) -> bytes:
        return orjson.dumps(value, default=str)

    return orjson.loads, dumps


def _std_dumps(value: Any) -> bytes:
    return json.dumps(value, default=str, separators=(",", ":"), ensure_ascii=False).encode()


_loads, dumps = _json_codec()


def loads(body: bytes, parse: Callable[[bytes], Any] | None = None) -> Any:
    """Decode a JSON body, with ``parse`` when given (a schema's ``loads``: JSON floats
    read as ``Decimal`` when a field is a decimal, so no digit is lost).

    Raises:
        DecodeError: the body is not JSON (the message shows its first bytes).
    """
    try:
        return (parse or _loads)(body)
    except ValueError as exc:
        raise DecodeError(f"response is not JSON: {short(body)}", value=body) from exc


class TooLarge(Exception):
    """A body longer than the limit; ``declared`` is its Content-Length when it had one."""

    def __init__(self, declared: int | None) -> None:
        super().__init__(declared)
        self.declared = declared


def is_whole_read(response: aiohttp.ClientResponse, limit: int) -> bool:
    """Whether ``response.read()`` may read the body whole: its declared Content-Length
    is within ``limit`` and it is not compressed (the common case, checked without a
    coroutine; otherwise :func:`read_bounded` counts what it reads).

    Raises:
        TooLarge: the declared Content-Length is over ``limit`` (nothing was read).
    """
    declared = response.content_length
    if declared is None:
        return False
    if declared > limit:
        raise TooLarge(declared)
    return "Content-Encoding" not in response.headers


async def read_bounded(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body of ``response``, if it is at most ``limit`` bytes.

    A declared Content-Length over the limit is refused before reading anything; without
    one, the body is read in chunks and reading stops as soon as the limit is passed, so
    at most ``limit`` bytes plus one chunk are ever held.

    Raises:
        TooLarge: the body is longer than ``limit``.
    """
    if is_whole_read(response, limit):
        return await response.read()
    # No length, or a compressed one (the decompressed body may be far larger): count.
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise TooLarge(None)
        chunks.append(chunk)
    return b"".join(chunks)


_DRAIN_LIMIT = 64 * 1024


async def drain(response: aiohttp.ClientResponse) -> None:
    """Read and drop a small unwanted body (a 404's, an error's), keeping its connection.

    aiohttp can only reuse a connection whose body was read to the end; a body that is
    large or of unknown length is left alone, and its connection is closed instead.
    """
    declared = response.content_length
    if declared is not None and declared <= _DRAIN_LIMIT:
        await response.read()


def parse_path(text: str | None, *, name: str) -> Path:
    """Split a dotted path; ``None`` or ``""`` is the empty path (the document itself).

    Raises:
        ValueError: a step is empty (``"a..b"``), naming the setting and the value.
    """
    if text is None or text == "":
        return ()
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a dotted path string, got {text!r}")
    steps = tuple(text.split("."))
    if any(not step for step in steps):
        raise ValueError(f"{name} must be a dotted path like 'data.user', got {text!r}")
    return steps


def pick(document: Any, path: Path) -> Any:
    """The value at ``path`` in ``document``; None when a step is missing or null.

    Raises:
        DecodeError: a step meets a value that is neither an object nor an array.
    """
    current = document
    for depth, step in enumerate(path):
        if current is None:
            return None
        if isinstance(current, Mapping):
            current = current.get(step)
        elif isinstance(current, list) and step.isdigit():
            index = int(step)
            current = current[index] if index < len(current) else None
        else:
            where = ".".join(path[:depth]) or "the document"
            raise DecodeError(
                f"path {'.'.join(path)!r}: expected an object at {where}, got {short(current)}",
                value=current,
            )
    return current


def to_rows(
    document: Any, schema: Schema, *, path: Path = (), fields: Mapping[str, Path] | None = None
) -> Rows:
    """The lookup value of a decoded document: a row, a list of rows, or None (a miss).

    Raises:
        DecodeError: the document or one of its rows does not fit the schema.
    """
    picked = pick(document, path) if path else document
    if picked is None:
        return None
    if isinstance(picked, list):
        return [_row(item, schema, fields) for item in picked]
    return _row(picked, schema, fields)


def _row(document: Any, schema: Schema, fields: Mapping[str, Path] | None) -> tuple[Any, ...]:
    if not fields:
        return schema.coerce(document)
    if not isinstance(document, Mapping):
        raise DecodeError(
            f"expected an object with fields {list(schema.names)}, got {short(document)}",
            value=document,
        )
    return schema.coerce({name: pick(document, fields.get(name, (name,))) for name in schema.names})
