"""A small HTTP dimension service for the demo, the benchmarks and docker compose.

``GET /users/{id}`` answers ``{"name": ..., "tier": ..., "credit": ...}`` for ids below
``--users`` and 404 otherwise; ``POST /users/_batch`` takes a JSON list of ids and answers
an object id -> document (absent ids left out). ``--latency`` seconds are added to every
request, as a remote service would; with ``--slow-every N``, ids divisible by N take
``--slow-latency`` seconds instead (a latency tail).

Run: ``python -m enrich.demo.dimension_service --port 8080 --latency 0.005``.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web

TIERS = ("bronze", "silver", "gold")


def user(uid: int) -> dict[str, object]:
    return {"name": f"user-{uid}", "tier": TIERS[uid % 3], "credit": round(uid * 0.5, 2)}


def make_app(
    latency: float, users: int, slow_every: int = 0, slow_latency: float = 0.0
) -> web.Application:
    async def one(request: web.Request) -> web.Response:
        try:
            uid = int(request.match_info["uid"])
        except ValueError:
            uid = -1
        wait = slow_latency if slow_every and uid >= 0 and uid % slow_every == 0 else latency
        if wait:
            await asyncio.sleep(wait)
        if uid < 0:
            return web.json_response({"error": "bad id"}, status=400)
        if not 0 <= uid < users:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(user(uid))

    async def batch(request: web.Request) -> web.Response:
        if latency:
            await asyncio.sleep(latency)
        ids = json.loads(await request.read())
        found = {str(i): user(int(i)) for i in ids if str(i).isdigit() and int(i) < users}
        return web.json_response(found)

    app = web.Application()
    app.router.add_post("/users/_batch", batch)
    app.router.add_get("/users/{uid}", one)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--slow-every", type=int, default=0)
    parser.add_argument("--slow-latency", type=float, default=0.0)
    args = parser.parse_args()
    web.run_app(
        make_app(args.latency, args.users, args.slow_every, args.slow_latency),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()
