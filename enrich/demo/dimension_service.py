"""A small HTTP dimension service for the demo, the benchmarks and docker compose.

``GET /users/{id}`` answers ``{"name": ..., "tier": ..., "credit": ...}`` for ids below
``--users`` and 404 otherwise; ``POST /users/_batch`` takes a JSON list of ids and answers
an object id -> document (absent ids left out). ``POST /score`` and ``POST /score/_batch``
score JSON objects of columns, one or a list (see :mod:`enrich.demo.scoring`): what a
user's own async function calls per row.

``--latency`` seconds are added to every request, as a remote service would. A latency
tail (see :class:`~enrich.demo.service_load.Tail`), deterministic so runs compare: with
``--slow-every N``, ids divisible by N (and about one scored body in N) take
``--slow-latency`` seconds instead; with ``--slow-fraction F``, that fraction of ids and
bodies, chosen by a hash, does.

It can behave like a real service under load (see :class:`Load`):

* ``--quota N``: at most N requests per second are served (a token bucket holding a
  tenth of a second's worth); any other request is answered at once with
  ``429 Too Many Requests`` and ``Retry-After: 1``;
* ``--knee K``: once more than K requests are in flight, a request's latency grows with
  the square of the excess ratio: ``latency * (in_flight / K) ** 2``, so throughput
  falls past the knee as a saturated store's does (GETs and scoring requests).

``GET /_stats`` answers what arrived: ``{"p50": s, "p99": s, "served": n, "refused": n,
"rows": n, "slow": n, "peak_in_flight": n,
"buckets": {tenth-of-a-second: requests arrived, served or refused}}`` (times of
``time.monotonic()``; p50 and p99: seconds a GET or a scoring request spent in the
service, over the last 100,000; rows: objects scored, slow: those that took the tail).
``DELETE /_stats`` starts the counts afresh (a benchmark's contenders, one by one).

Run: ``python -m enrich.demo.dimension_service --port 8080 --latency 0.005``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from aiohttp import web

from .scoring import score_routes
from .service_load import Load as Load, Tail, hold

TIERS = ("bronze", "silver", "gold")


def user(uid: int) -> dict[str, object]:
    return {"name": f"user-{uid}", "tier": TIERS[uid % 3], "credit": round(uid * 0.5, 2)}


def make_app(
    latency: float,
    users: int,
    slow_every: int = 0,
    slow_latency: float = 0.0,
    *,
    slow_fraction: float = 0.0,
    quota: float = 0.0,
    knee: int = 0,
) -> web.Application:
    load = Load(quota=quota, knee=knee)
    tail = Tail(
        latency=latency,
        slow_latency=slow_latency,
        slow_every=slow_every,
        slow_fraction=slow_fraction,
    )

    async def one(request: web.Request) -> web.Response:
        if not load.admit(time.monotonic()):
            return web.json_response({"error": "quota"}, status=429, headers={"Retry-After": "1"})
        try:
            uid = int(request.match_info["uid"])
        except ValueError:
            uid = -1
        await hold(load, tail.of(uid >= 0 and tail.is_slow_id(uid)))
        if uid < 0:
            return web.json_response({"error": "bad id"}, status=400)
        if not 0 <= uid < users:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(user(uid))

    async def batch(request: web.Request) -> web.Response:
        if not load.admit(time.monotonic()):
            return web.json_response({"error": "quota"}, status=429, headers={"Retry-After": "1"})
        if latency:
            await asyncio.sleep(latency)
        ids = json.loads(await request.read())
        found = {str(i): user(int(i)) for i in ids if str(i).isdigit() and int(i) < users}
        return web.json_response(found)

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(load.stats())

    async def reset(request: web.Request) -> web.Response:
        load.reset()
        return web.json_response(load.stats())

    app = web.Application()
    app.router.add_get("/_stats", stats)
    app.router.add_delete("/_stats", reset)
    app.router.add_post("/users/_batch", batch)
    app.router.add_get("/users/{uid}", one)
    app.router.add_routes(score_routes(load, tail))
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--slow-every", type=int, default=0)
    parser.add_argument("--slow-latency", type=float, default=0.0)
    parser.add_argument(
        "--slow-fraction", type=float, default=0.0, help="this share of bodies/ids is slow"
    )
    parser.add_argument("--quota", type=float, default=0.0, help="requests/s, then 429")
    parser.add_argument("--knee", type=int, default=0, help="in flight, then slower")
    args = parser.parse_args()
    web.run_app(
        make_app(
            args.latency,
            args.users,
            args.slow_every,
            args.slow_latency,
            slow_fraction=args.slow_fraction,
            quota=args.quota,
            knee=args.knee,
        ),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()
