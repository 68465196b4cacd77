"""An async function the clean-stop test's job runs: it counts its openings and closings
in Redis, so the test can tell every run's ``close()`` was called."""

from __future__ import annotations

from typing import Any

import redis.asyncio

from enrich import AsyncFunction

OPENS = "stop-test:opens"
CLOSES = "stop-test:closes"


class Counted(AsyncFunction):
    """Adds ``checked = true`` to each row; INCRs :data:`OPENS` in ``open()`` and
    :data:`CLOSES` in ``close()``, which also closes its client."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client: Any = None

    async def open(self) -> None:
        self.client = redis.asyncio.Redis.from_url(self.url)
        await self.client.incr(OPENS)

    async def invoke(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"checked": True}]

    async def close(self) -> None:
        if self.client is not None:
            await self.client.incr(CLOSES)
            await self.client.aclose()
            self.client = None
