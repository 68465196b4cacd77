"""What the full-cache tests ask a ``FullCacheSource`` from the test's thread: its
lookups, statistics and the end of its load, each run on the runtime loop (where the
source's clients live) with a hang guard."""

from __future__ import annotations

from typing import Any

from enrich import FullCacheSource
from enrich.engine.runtime import run_sync


def lookup(source: Any, keys: list[Any]) -> dict[Any, Any]:
    """``source.lookup_many(keys)``, as a plain dict."""
    return dict(run_sync(lambda: source.lookup_many(keys), timeout=20))


def stats(source: FullCacheSource) -> Any:
    """``source.statistics()``, read on the loop."""

    async def read() -> Any:
        return source.statistics()

    return run_sync(read, timeout=10)


def wait_load(source: FullCacheSource, timeout: float = 30) -> None:
    """Wait for the load running now (started by a timer the clock ran, or the first)."""

    async def wait() -> None:
        await source.dimension().wait_loaded()

    run_sync(wait, timeout=timeout)
