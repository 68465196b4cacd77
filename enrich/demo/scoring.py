"""The demo service's scoring endpoints: what a user's own async function calls per row.

``POST /score`` takes a JSON object of columns (``{"user_id": 7, "amount": 12.5,
"country": "fr"}``) and answers ``{"score": <double>, "label": <string>}``, derived from
the body alone (:func:`score`), so a client can check every answer. ``POST /score/_batch``
takes a JSON list of such objects and answers a list of results, one per item, in the
order given. A body that is not JSON, or not of that shape, is answered at once with 400
and ``{"error": ...}`` naming what is wrong (and, in a list, which item).

Both take the service's latency and tail (see
:class:`~enrich.demo.service_load.Tail`; a batch waits for its slowest item, as a
service scoring the items in parallel does), its quota and its knee, and are counted in
``/_stats`` (``served``: requests; ``rows``: objects scored; ``slow``: those of them that
took the tail).
"""

from __future__ import annotations

import json
import time
import zlib
from typing import Any

from aiohttp import web

from .service_load import Load, Tail, hold

# The label of a score: the first threshold it reaches, from the top.
LABELS = ((0.9, "high"), (0.5, "medium"), (0.0, "low"))
_SCORE_STEPS = 1_000_000

_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


class BadBody(ValueError):
    """A request body the scoring endpoints refuse; the message names what is wrong."""


def canonical(columns: dict[str, Any]) -> bytes:
    """The body's canonical JSON (sorted keys, no spaces): equal objects, equal bytes,
    whatever their key order or spacing on the wire."""
    text = json.dumps(columns, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode()


def score_of(body: bytes) -> dict[str, Any]:
    """The answer to a canonical body (see :func:`canonical`)."""
    value = zlib.crc32(body) % _SCORE_STEPS / _SCORE_STEPS
    label = next(name for threshold, name in LABELS if value >= threshold)
    return {"score": value, "label": label}


def score(columns: dict[str, Any]) -> dict[str, Any]:
    """What ``POST /score`` answers for ``columns``: ``{"score": s, "label": l}`` with
    ``0 <= s < 1`` a function of the object's canonical JSON, and ``l`` one of
    ``low``/``medium``/``high``."""
    return score_of(canonical(columns))


def _kind(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise BadBody(f"body is not JSON: {exc}") from None


def columns_of(document: Any, where: str = "body") -> dict[str, Any]:
    """``document`` as an object of columns, or :class:`BadBody` naming ``where``."""
    if not isinstance(document, dict):
        raise BadBody(
            f"{where} must be a JSON object of columns, got {_kind(document)} ({_shown(document)})"
        )
    return document


def rows_of(document: Any) -> list[dict[str, Any]]:
    """``document`` as a list of objects of columns, or :class:`BadBody` naming the item."""
    if not isinstance(document, list):
        raise BadBody(
            f"body must be a JSON list of objects of columns, got {_kind(document)} "
            f"({_shown(document)})"
        )
    return [columns_of(item, f"item {n} of the list") for n, item in enumerate(document)]


def score_routes(load: Load, tail: Tail) -> list[web.RouteDef]:
    """The two scoring endpoints of a service counting in ``load`` with ``tail``."""

    def refused() -> web.Response:
        return web.json_response({"error": "quota"}, status=429, headers={"Retry-After": "1"})

    def bad(exc: BadBody) -> web.Response:
        return web.json_response({"error": str(exc)}, status=400)

    async def one(request: web.Request) -> web.Response:
        if not load.admit(time.monotonic()):
            return refused()
        try:
            body = canonical(columns_of(parse(await request.read())))
        except BadBody as exc:
            return bad(exc)
        slow = tail.is_slow_body(body)
        load.rows += 1
        load.slow += slow
        await hold(load, tail.of(slow))
        return web.json_response(score_of(body))

    async def batch(request: web.Request) -> web.Response:
        if not load.admit(time.monotonic()):
            return refused()
        try:
            bodies = [canonical(row) for row in rows_of(parse(await request.read()))]
        except BadBody as exc:
            return bad(exc)
        slow = sum(tail.is_slow_body(body) for body in bodies)
        load.rows += len(bodies)
        load.slow += slow
        await hold(load, tail.of(slow > 0))
        return web.json_response([score_of(body) for body in bodies])

    return [web.post("/score", one), web.post("/score/_batch", batch)]
