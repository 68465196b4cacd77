"""A service with a knee, written apart from the demo's (so that the adaptive limit is not
measured against the one service its tests know): ``GET /users/{id}`` answers after
``latency`` seconds while at most ``knee`` requests are in flight, after
``latency * (in_flight / knee) ** 2`` above (``in_flight`` counted when the request
arrives, itself included), and ``503 Service Unavailable`` at once above ``limit``.

``GET /_stats`` answers what it saw since the last ``POST /_reset``: requests served and
refused, the p50/p99 of a served request's time in the service, the peak and the p99 of
the requests in flight at an arrival.

Run: ``python -m benchmarks.knee_service --port 8090 --latency 0.02 --knee 16 --limit 64``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from aiohttp import web


class Knee:
    """The service's state: its load model and what it measured."""

    def __init__(self, latency: float, knee: int, limit: int) -> None:
        self.latency = latency
        self.knee = knee
        self.limit = limit
        self.reset()

    def reset(self) -> None:
        self.in_flight = 0
        self.served = self.refused = 0
        self.times: list[float] = []
        self.loads: list[int] = []

    def stats(self) -> dict[str, object]:
        times, loads = sorted(self.times), sorted(self.loads)

        def at(values: list[float] | list[int], q: float) -> float | None:
            return float(values[min(len(values) - 1, int(q * len(values)))]) if values else None

        return {
            "served": self.served,
            "refused": self.refused,
            "p50": at(times, 0.5),
            "p99": at(times, 0.99),
            "peak_in_flight": max(loads, default=0),
            "p99_in_flight": at(loads, 0.99),
        }


def make_app(latency: float, knee: int, limit: int) -> web.Application:
    state = Knee(latency, knee, limit)

    async def user(request: web.Request) -> web.Response:
        load = state.in_flight + 1
        state.loads.append(load)
        if load > state.limit:
            state.refused += 1
            return web.Response(status=503, text="overloaded")
        state.in_flight = load
        started = time.monotonic()
        try:
            await asyncio.sleep(state.latency * max(1.0, (load / state.knee) ** 2))
        finally:
            state.in_flight -= 1
        state.times.append(time.monotonic() - started)
        state.served += 1
        uid = request.match_info["uid"]
        return web.json_response({"name": f"user-{uid}", "tier": "gold", "credit": 1.5})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(state.stats())

    async def reset(request: web.Request) -> web.Response:
        state.reset()
        return web.json_response({"reset": True})

    app = web.Application()
    app.router.add_get("/users/{uid}", user)
    app.router.add_get("/_stats", stats)
    app.router.add_post("/_reset", reset)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--knee", type=int, default=16)
    parser.add_argument("--limit", type=int, default=64)
    args = parser.parse_args()
    web.run_app(
        make_app(args.latency, args.knee, args.limit),
        host="127.0.0.1",
        port=args.port,
        access_log=None,
        print=None,
    )


if __name__ == "__main__":
    main()
