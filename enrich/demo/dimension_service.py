"""A small HTTP dimension service for the demo, the benchmarks and docker compose.

``GET /users/{id}`` answers ``{"name": ..., "tier": ..., "credit": ...}`` for ids below
``--users`` and 404 otherwise; ``POST /users/_batch`` takes a JSON list of ids and answers
an object id -> document (absent ids left out). ``--latency`` seconds are added to every
request, as a remote service would; with ``--slow-every N``, ids divisible by N take
``--slow-latency`` seconds instead (a latency tail).

It can behave like a real service under load (see :class:`Load`):

* ``--quota N``: at most N requests per second are served (a token bucket holding a
  tenth of a second's worth); any other request is answered at once with
  ``429 Too Many Requests`` and ``Retry-After: 1``;
* ``--knee K``: once more than K requests are in flight, a request's latency grows with
  the square of the excess ratio: ``latency * (in_flight / K) ** 2``, so throughput
  falls past the knee as a saturated store's does.

``GET /_stats`` answers what arrived: ``{"p50": s, "p99": s, "served": n, "refused": n,
"peak_in_flight": n,
"buckets": {tenth-of-a-second: requests arrived, served or refused}}`` (times of
``time.monotonic()``; p50 and p99: seconds a GET spent in the service).

Run: ``python -m enrich.demo.dimension_service --port 8080 --latency 0.005``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

TIERS = ("bronze", "silver", "gold")


def user(uid: int) -> dict[str, object]:
    return {"name": f"user-{uid}", "tier": TIERS[uid % 3], "credit": round(uid * 0.5, 2)}


@dataclass
class Load:
    """The service's load model and what it saw: a quota (requests per second, 0: none)
    and a knee (requests in flight, 0: none). Synchronous; ``now`` is passed in."""

    quota: float = 0.0
    knee: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    served: int = 0
    refused: int = 0
    buckets: Counter[int] = field(default_factory=Counter)
    # Seconds each served GET took in the service (its wait, the knee's included).
    latencies: list[float] = field(default_factory=list)
    _tokens: float = 0.0
    _last: float | None = None

    def admit(self, now: float) -> bool:
        """Whether a request arriving at ``now`` is within the quota (and count it)."""
        self.buckets[int(now * 10)] += 1
        if self.quota:
            burst = max(1.0, self.quota * 0.1)
            if self._last is None:
                self._tokens = burst
            else:
                self._tokens = min(burst, self._tokens + (now - self._last) * self.quota)
            self._last = now
            if self._tokens < 1:
                self.refused += 1
                return False
            self._tokens -= 1
        self.served += 1
        return True

    def latency(self, base: float) -> float:
        """The latency of a request starting now, given ``in_flight`` (itself included)."""
        if self.knee and self.in_flight > self.knee:
            return base * (self.in_flight / self.knee) ** 2
        return base

    def stats(self) -> dict[str, object]:
        ordered = sorted(self.latencies)

        def quantile(q: float) -> float | None:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None

        return {
            "p50": quantile(0.5),
            "p99": quantile(0.99),
            "served": self.served,
            "refused": self.refused,
            "peak_in_flight": self.peak_in_flight,
            "buckets": {str(k): v for k, v in sorted(self.buckets.items())},
        }


def make_app(
    latency: float,
    users: int,
    slow_every: int = 0,
    slow_latency: float = 0.0,
    *,
    quota: float = 0.0,
    knee: int = 0,
) -> web.Application:
    load = Load(quota=quota, knee=knee)

    async def one(request: web.Request) -> web.Response:
        if not load.admit(time.monotonic()):
            return web.json_response({"error": "quota"}, status=429, headers={"Retry-After": "1"})
        try:
            uid = int(request.match_info["uid"])
        except ValueError:
            uid = -1
        load.in_flight += 1
        load.peak_in_flight = max(load.peak_in_flight, load.in_flight)
        started = time.monotonic()
        try:
            base = slow_latency if slow_every and uid >= 0 and uid % slow_every == 0 else latency
            wait = load.latency(base)
            if wait:
                await asyncio.sleep(wait)
        finally:
            load.in_flight -= 1
            load.latencies.append(time.monotonic() - started)
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

    app = web.Application()
    app.router.add_get("/_stats", stats)
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
    parser.add_argument("--quota", type=float, default=0.0, help="requests/s, then 429")
    parser.add_argument("--knee", type=int, default=0, help="in flight, then slower")
    args = parser.parse_args()
    web.run_app(
        make_app(
            args.latency,
            args.users,
            args.slow_every,
            args.slow_latency,
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
