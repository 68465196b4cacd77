"""``enrich check job.yaml``: validate a job config and try each of its stores.

Each store is asked for one key (its ``check_key``, default ``0``): an answer, found or
not, shows the store is reachable, accepts the credentials and speaks the protocol; an
error for that key alone (an HTTP 400 for a key the service rejects) fails the check too,
with a hint to set ``check_key``. One line per store; no Spark is started.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from enrich import SourceUnavailable
from enrich.engine.runtime import run_sync

CHECK_TIMEOUT = 10.0  # seconds per store, connection and lookup together


@dataclass(frozen=True)
class StoreCheck:
    """The outcome of one store's check: ``ok``, and a line saying what happened."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAILED':<6} store {self.name!r}: {self.detail}"


def check_store(name: str, store: Any, key: Any, timeout: float = CHECK_TIMEOUT) -> StoreCheck:
    """Look up ``key`` in ``store`` once; never raises for the store's own failures."""

    async def probe() -> Any:
        try:
            return await asyncio.wait_for(store.lookup_many([key]), timeout)
        finally:
            await store.aclose()

    started = time.perf_counter()
    try:
        answers = run_sync(probe)
    except asyncio.TimeoutError:
        return StoreCheck(name, False, f"no answer within {timeout:g}s ({store!r})")
    except Exception as exc:  # whatever the driver raised: the reason is the message
        return StoreCheck(name, False, f"{_reason(exc)} ({store!r})")
    elapsed = (time.perf_counter() - started) * 1e3
    answer = answers.get(key)
    if isinstance(answer, BaseException):
        hint = ""
        if not isinstance(answer, SourceUnavailable):  # the key's own error, maybe
            hint = f"; set stores.{name}.check_key to a key the store accepts"
        return StoreCheck(name, False, f"{_reason(answer)} ({store!r}){hint}")
    found = "found" if answer is not None else "not found (the store answered)"
    return StoreCheck(name, True, f"key {key!r} {found} in {elapsed:.0f} ms")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def check(config: Any) -> list[StoreCheck]:
    """Check every store of a loaded :class:`~jobs._config.JobConfig`."""
    return [
        check_store(name, store, config.check_keys.get(name, 0))
        for name, store in config.stores.items()
    ]
