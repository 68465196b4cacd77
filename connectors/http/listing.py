"""Reading a whole HTTP dimension from a list endpoint, for a full cache.

``HttpLookup(..., list_url="https://svc/users?page={}", list_key="id")`` GETs pages
0, 1, 2, ... of the list endpoint; a page is a JSON array of items, or an object holding
the array at ``list_items`` (a dotted path, e.g. ``"data.items"``). Each item is one
key's document: its key is the item's ``list_key`` field, its row what a lookup of the
key would decode from it (``path`` and ``fields`` apply as for a per-key answer). The
listing ends at the first page without items, or at a page bringing no key not seen
before (a server that repeats its last page). Requests go through the same pool, headers,
credentials, redirect policy and body limit as lookups.

Keys are compared by their text, as a URL slot renders them: the key ``42`` and the key
``"42"`` are the same key (they would request the same URL).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Hashable
from typing import Any

from enrich.spi import DecodeError, short

from . import body
from .request import send
from .url import UrlTemplate


def store_key(key: Any) -> Hashable:
    """A lookup key as the listing names it: its text (a tuple of texts, composite).

    Raises:
        TypeError: a part is not a str or an int.
    """
    if isinstance(key, tuple):
        return tuple(_text(part) for part in key)
    return _text(key)


def _text(part: Any) -> str:
    if isinstance(part, bool) or not isinstance(part, (str, int)):
        raise TypeError(f"a listed key part must be a str or an int, got {short(part)}")
    return str(part)


async def scan_pages(
    lookup: Any, template: UrlTemplate, key_field: str, items_path: body.Path
) -> AsyncIterator[tuple[dict[Hashable, Any], int]]:
    """Yield ``({store key: answer}, bytes read)`` per page of ``lookup``'s listing
    (``lookup`` is the ``HttpLookup``; not imported here: an import circle).

    Raises:
        LookupFailed: a page's request failed (status, timeout, connection).
        DecodeError: a page is not JSON, holds no array of items, or an item has no key.
    """
    settings = lookup._settings
    target = f"GET {template.redacted()}"
    seen: set[Hashable] = set()
    for page in itertools.count():
        url = template.expand(page)
        payload = await send(
            lookup._pool(), settings, "GET", url, key=None, data=None, target=target
        )
        document = body.loads(payload or b"[]", lookup.schema.loads)
        items = body.pick(document, items_path) if items_path else document
        if items is None:
            items = []
        if not isinstance(items, list):
            raise DecodeError(
                f"{target}: page {page} holds no array of items, got {short(items)}", value=items
            )
        answers: dict[Hashable, Any] = {}
        for number, item in enumerate(items):
            key = item.get(key_field) if isinstance(item, dict) else None
            if key is None:
                raise DecodeError(
                    f"{target}: item {number} of page {page} has no {key_field!r}: {short(item)}",
                    value=item,
                )
            try:
                name = store_key(key)
            except TypeError as exc:
                raise DecodeError(f"{target}: item {number} of page {page}: {exc}") from None
            try:
                answers[name] = lookup._rows(item)
            except DecodeError as exc:  # that key's own error, as a lookup would give it
                answers[name] = exc
        fresh = answers.keys() - seen
        if not fresh:
            return
        seen.update(fresh)
        yield answers, len(payload or b"")
